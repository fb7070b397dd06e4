from __future__ import annotations

import msgspec
import pytest

from agui_engine.protocol.errors import LimitExceededError
from agui_engine.protocol.events import RunErrorEvent
from agui_engine.transports.bearer_auth import UnauthorizedError, check_bearer, extract_bearer
from agui_engine.transports.envelope import ErrorBody
from agui_engine.transports.input_decoding import decode_run_input
from agui_engine.transports.input_errors import InvalidInputError, MalformedInputError
from agui_engine.transports.retrying_client import (
    ConnectionLostError,
    RetryPolicy,
    end_or_raise,
    remote_error_from_body,
    remote_error_from_line,
)

from .scripted import make_input


def test_decode_run_input_accepts_text_bytes_and_decoded_values() -> None:
    raw = msgspec.json.encode(make_input("r"))
    assert decode_run_input(raw) == decode_run_input(raw.decode()) == decode_run_input(msgspec.json.decode(raw))


@pytest.mark.parametrize(
    ("data", "error", "where"),
    [
        (b'{"threadId": "t",', MalformedInputError, "byte"),
        (b'{"threadId": "t", "runId": "r", "messages": [{"role": "robot", "id": "1"}]}', InvalidInputError, "$.messages[0]"),
        (b'{"threadId": "t", "messages": []}', InvalidInputError, "runId"),
        (b'{"threadId": "t", "runId": "", "messages": []}', InvalidInputError, "$.runId"),
        (b'{"threadId": "t", "runId": "' + b"r" * 300 + b'", "messages": []}', InvalidInputError, "$.runId"),
    ],
)
def test_decode_run_input_errors_say_where(data: bytes, error: type, where: str) -> None:
    with pytest.raises(error) as ei:
        decode_run_input(data)
    assert where in str(ei.value)


def test_size_limit() -> None:
    with pytest.raises(LimitExceededError) as ei:
        decode_run_input(b" " * 101, max_bytes=100)
    assert ei.value.http_status == 413 and "101" in str(ei.value)


def test_bearer_checks() -> None:
    assert extract_bearer("Bearer abc") == "abc"
    assert extract_bearer("bearer  abc ") == "abc"
    assert extract_bearer("Basic abc") is None and extract_bearer(None) is None and extract_bearer("Bearer ") is None
    check_bearer(None, None)
    check_bearer("Bearer s", "s")
    for header in (None, "Bearer t", "Basic s", "Bearer s2"):
        with pytest.raises(UnauthorizedError) as ei:
            check_bearer(header, "s")
        assert "s2" not in str(ei.value) and ei.value.http_status == 401


def test_retry_policy_is_bounded_and_jittered() -> None:
    policy = RetryPolicy(max_retries=3, backoff_initial=0.1, backoff_max=0.5)
    for n, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (10, 0.5)]:
        delays = [policy.delay(n) for _ in range(50)]
        assert all(cap * 0.5 <= d <= cap for d in delays)


def test_failure_rule_and_remote_errors() -> None:
    lost = ConnectionLostError("gone")
    with pytest.raises(ConnectionLostError):
        end_or_raise(lost, yielded=False)
    assert end_or_raise(lost, yielded=True) == RunErrorEvent(message="gone", code="connection_lost")
    e = remote_error_from_body(503, b'{"error": {"code": "server_busy", "message": "full"}}', where="POST x")
    assert (e.status, e.code, e.retryable) == (503, "server_busy", True) and "full" in e.message
    e = remote_error_from_body(500, b"<html>oops</html>", where="POST x")
    assert e.code == "remote_refused" and "oops" in e.message
    e = remote_error_from_line(ErrorBody(code="cursor_expired", message="m", status=4410), where="ws")
    assert (e.status, e.code) == (4410, "cursor_expired")
    # an HTML page is named by its type, never dumped; plain text is quoted on one line
    e = remote_error_from_body(501, b"<!DOCTYPE HTML>\n<html>\n<p>Unsupported</p>\n</html>\n", where="POST x",
                               content_type="text/html;charset=utf-8")
    assert e.message == "POST x answered 501 text/html" and e.content_type == "text/html"
    e = remote_error_from_body(404, b"404: Not\n Found\n", where="POST x", content_type="text/plain; charset=utf-8")
    assert e.message == "POST x answered 404: 404: Not Found"


@pytest.mark.parametrize("transport", ["sse", "ws"])
async def test_client_agents_resume_after_network_drops(drop_proxy, transport: str) -> None:  # type: ignore[no-untyped-def]
    """RemoteClientBase.run, the one reconnect loop of SSEAgent and WebSocketAgent:
    two real mid-stream drops (a TCP proxy cuts the connection), two resumes, and
    the client's events are exactly the agent's (nothing lost, nothing repeated)."""
    from agui_engine.transports.sse_client import SSEAgent
    from agui_engine.transports.sse_server import start_sse_server
    from agui_engine.transports.websocket_client import WebSocketAgent
    from agui_engine.transports.websocket_server import start_websocket_server

    from .scripted import ScriptedAgent, make_input

    start, client_cls, scheme, query = {
        "sse": (start_sse_server, SSEAgent, "http", ""),
        "ws": (start_websocket_server, WebSocketAgent, "ws", "?batch=0"),
    }[transport]
    async with await start(ScriptedAgent(deltas=40, pause=0.005)) as srv:
        port = int(srv.url.rstrip("/").rpartition(":")[2])
        proxy = drop_proxy("127.0.0.1", port, cut_after=1200, drops=2)
        await proxy.start()
        client = client_cls(f"{scheme}://127.0.0.1:{proxy.port}/{query}", backoff_initial=0.01)
        remote = [e async for e in client.run(make_input())]
    assert remote == [e async for e in ScriptedAgent(deltas=40).run(make_input())]
    assert (client.reconnects, proxy.connections) == (2, 3)


def test_remote_error_messages_are_cut_to_the_shared_bound() -> None:
    """A remote error message, JSON or not, is cut to MAX_ERROR_MESSAGE_CHARS: the one
    bound adapters and transports share."""
    from agui_engine.protocol.errors import MAX_ERROR_MESSAGE_CHARS

    long = "é" * (3 * MAX_ERROR_MESSAGE_CHARS)
    body = msgspec.json.encode({"error": {"code": "x", "message": long}})
    for err in (
        remote_error_from_body(500, body, where="w"),
        remote_error_from_body(502, long.encode(), where="w"),  # not JSON: a proxy's page
        remote_error_from_line(ErrorBody(code="x", message=long), where="w"),
    ):
        kept = str(err).count("é")
        assert kept == MAX_ERROR_MESSAGE_CHARS, (str(err)[:40], kept)
