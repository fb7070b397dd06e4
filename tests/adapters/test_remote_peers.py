"""Third-party AG-UI servers behind ``agui-engine serve --agent http://...``: pydantic-ai's
``AGUIAdapter`` and the official ``ag-ui-langgraph`` endpoint (``tests/adapters/remote_peers.py``),
each a real uvicorn server on loopback, the gateway a real ``agui-engine serve`` subprocess.

The real ``@ag-ui/client`` and the Python ``Thread`` behind the gateway end with the messages
the peer's own stream gives ``@ag-ui/client`` directly; the ag-ui-langgraph stream, whose first
tool argument fragment is lost, ends with the answer (repair ``args_from_snapshot``), not with
``RUN_ERROR``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from agui_engine.loops.thread import Thread
from agui_engine.transports import SSEAgent
from tests.helpers import free_port, node_with

from .agent_runs import JS, SERVE_START_SECONDS, check
from .remote_peers import WEATHER


def _wait_for(proc: subprocess.Popen[bytes], marker: str) -> str:
    """The first stderr line of ``proc`` that contains ``marker`` (the process must not exit first)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + SERVE_START_SECONDS
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode()
        if not line and proc.poll() is not None:
            break
        if marker in line:
            return line
    raise AssertionError(f"no {marker!r} from {proc.args!r}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - a hung server fails the test below
        proc.kill()
        proc.wait()


@pytest.fixture(params=["pydantic_ai_app", "langgraph_app"], scope="module")
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, str]]:
    """(peer name, the peer's URL, the gateway's URL in front of it)."""
    port = free_port()
    peer = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", f"tests.adapters.remote_peers:{request.param}", "--factory",
         "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    gateway: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(peer, "Uvicorn running on")
        peer_url = f"http://127.0.0.1:{port}/"
        gateway = subprocess.Popen([sys.executable, "-m", "agui_engine", "serve", "--port", "0", "--agent", peer_url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        gateway_url = _wait_for(gateway, "serving on ").split()[-1]
        yield request.param, peer_url, gateway_url
    finally:
        if gateway is not None:
            _stop(gateway)
        _stop(peer)


def _client_run(url: str, thread_id: str) -> dict[str, Any]:
    node = node_with("@ag-ui/client")
    out = subprocess.run([node, str(JS / "remote_client.mjs"), url, thread_id, "weather in Paris?"],
                         capture_output=True, text=True, timeout=120, cwd=JS)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _normalised(messages: list[dict[str, Any]]) -> list[Any]:
    """The messages with every id (the peer makes fresh ones per run) replaced by its order
    of appearance, and the keys a client leaves out when empty dropped."""
    ids: dict[str, str] = {}

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items() if v not in (None, "") or k == "content"}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if key in ("id", "toolCallId") and isinstance(value, str):
            return ids.setdefault(value, f"id{len(ids)}")
        return value

    return [walk(m) for m in messages]


def test_the_client_behind_the_gateway_ends_with_the_messages_the_peer_gives_it_directly(
        served: tuple[str, str, str]) -> None:
    name, peer_url, gateway_url = served
    direct = _client_run(peer_url, f"direct-{name}")
    via = _client_run(gateway_url, f"via-{name}")
    assert direct["error"] is None and via["error"] is None
    assert _normalised(via["messages"]) == _normalised(direct["messages"])
    assert any(m.get("content") == f"The weather: {WEATHER}" for m in via["messages"])  # the answer
    types = [e["type"] for e in via["events"]]
    assert types[-1] == "RUN_FINISHED" and "RUN_ERROR" not in types
    # what the gateway sent is a valid run (our verifier, ag-ui-validate)
    from agui_engine.protocol.codec import decode_event

    check([decode_event(json.dumps(e).encode()) for e in via["events"]])
    calls = [c for m in via["messages"] for c in m.get("toolCalls") or []]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"}]
    if name == "langgraph_app":
        # the peer's own stream lost the first fragment: only the snapshot had the arguments
        args = "".join(e.get("delta", "") for e in direct["events"] if e["type"] == "TOOL_CALL_ARGS")
        assert args == 'is"}'


async def test_the_python_thread_behind_the_gateway_ends_with_the_same_messages(served: tuple[str, str, str]) -> None:
    name, peer_url, gateway_url = served
    direct = _client_run(peer_url, f"direct-thread-{name}")
    thread = Thread(SSEAgent(gateway_url), thread_id=f"via-thread-{name}")
    turn = await thread.send("weather in Paris?")
    assert turn.status == "finished"
    assert _normalised(msgspec.to_builtins(thread.messages)) == _normalised(direct["messages"])
