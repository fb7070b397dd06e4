"""Issue 30, point 5: the client agents' reconnects have a total budget per run.

A hostile (or broken) upstream sends ONE new event per connection, then drops it, again and again.
Every connection makes progress, so the per-drop retry count (``max_retries``) starts again each
time; without a total budget the client followed it forever (170 reconnects in 30 s)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from agui_engine.protocol.events import RunErrorEvent, RunStartedEvent
from agui_engine.transports.retrying_client import MAX_RECONNECTS_PER_RUN, ConnectionLostError
from agui_engine.transports.sse_client import SSEAgent

from .scripted import make_input


@pytest.fixture
async def one_event_then_drop() -> AsyncIterator[tuple[str, list[str | None]]]:
    """A real HTTP server on loopback: each POST answers an SSE stream with one event whose id is
    one further than the client's Last-Event-ID, then closes the connection mid-run."""
    seen: list[str | None] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        last = request.headers.get("Last-Event-ID")
        seen.append(last)
        body = await request.json()
        run_id, thread_id = body["runId"], body["threadId"]
        seq = int(last.rsplit(":", 1)[1]) + 1 if last else 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if seq == 1:
            data = f'{{"type":"RUN_STARTED","threadId":"{thread_id}","runId":"{run_id}"}}'
        else:
            data = f'{{"type":"CUSTOM","name":"tick","value":{seq}}}'
        await response.write(f"id: {run_id}:{seq}\ndata: {data}\n\n".encode())
        # the connection ends here, the run unfinished (no RUN_FINISHED): a drop
        return response

    app = web.Application()
    app.router.add_post("/", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/", seen
    finally:
        await runner.cleanup()


async def test_a_server_that_sends_one_event_and_drops_is_given_up_after_the_budget(
    one_event_then_drop: tuple[str, list[str | None]],
) -> None:
    url, seen = one_event_then_drop
    client = SSEAgent(url, backoff_initial=0.001, backoff_max=0.001)  # the budget counts, not the clock
    events = [e async for e in client.run(make_input("r1"))]
    assert isinstance(events[0], RunStartedEvent) and sum(isinstance(e, RunStartedEvent) for e in events) == 1
    assert client.reconnects == MAX_RECONNECTS_PER_RUN
    assert len(seen) == MAX_RECONNECTS_PER_RUN + 1  # the first connection, then the budget
    assert seen[1:] == [f"r1:{n}" for n in range(1, MAX_RECONNECTS_PER_RUN + 1)]  # each one resumed, none restarted
    last = events[-1]
    assert isinstance(last, RunErrorEvent) and last.code == ConnectionLostError.default_code
    assert f"MAX_RECONNECTS_PER_RUN={MAX_RECONNECTS_PER_RUN}" in last.message
