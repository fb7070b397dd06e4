"""The run registry as a front end over pieces with one job each (issue 29): the one
``resume(...)`` every transport calls, thread histories in a store of their own
(``RunRegistry(threads=...)``, the ``ThreadStore`` interface), the registry importing nothing
from ``genui/``, and no import cycle among the transports' modules (function-level imports
counted)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agui_engine.protocol.codec import decode_event
from agui_engine.protocol.events import RunAgentInput, UserMessage
from agui_engine.transports.admission import Caller
from agui_engine.transports.eventlog import BadCursorError, CursorExpiredError, InMemoryEventLog, UnknownRunError
from agui_engine.transports.history import MemoryThreadStore, UnknownThreadError
from agui_engine.transports.registry_options import RegistryOptions
from agui_engine.transports.runs import RunRegistry

from .scripted import ScriptedAgent, make_input

TRANSPORTS = Path(__file__).resolve().parents[2] / "agui_engine" / "transports"
PACKAGE = "agui_engine.transports"


async def finished(registry: RunRegistry, run_id: str) -> list[str]:
    """The event types of a run, read to its end."""
    out: list[str] = []
    async with registry.subscribe(registry.get(run_id)) as sub:
        async for sl in sub.events(timeout=5):
            if sl is not None:
                out += [decode_event(p).type.value for p in sl.payloads]
    return out


async def test_resume_reads_after_the_cursor_and_checks_it_before_any_stream() -> None:
    reg = RunRegistry(ScriptedAgent(deltas=5), options=RegistryOptions(max_retained=10))
    run = await reg.start(make_input("r"), owner="alice", address="10.0.0.1")
    whole = await finished(reg, "r")
    sub, first = await reg.resume("r", "r:3", Caller("alice"))
    assert first is not None and first.first_seq == 4 and first.finished
    assert [decode_event(p).type.value for p in first.payloads] == whole[3:]
    sub.close()
    sub, first = await reg.resume("r", None, Caller(None, run.key))  # no cursor: from the start, by key
    assert first is not None and first.first_seq == 1
    sub.close()
    with pytest.raises(BadCursorError):
        await reg.resume("r", "other:1", Caller("alice"))
    with pytest.raises(BadCursorError):
        await reg.resume("r", "r:99", Caller("alice"))  # ahead of the log: nobody handed it out
    with pytest.raises(UnknownRunError):
        await reg.resume("r", "r:1", Caller("mallory"))  # not yours: the same 404 as no run
    with pytest.raises(UnknownRunError):
        await reg.resume("nope", "nope:1", Caller("alice"))
    assert reg.get("r").subscribers == 0  # every refused resume left the run again


async def test_resume_of_a_cursor_the_log_no_longer_holds_is_refused_at_once() -> None:
    log = InMemoryEventLog(max_events=4)
    reg = RunRegistry(ScriptedAgent(deltas=20), log=log)
    await reg.start(make_input("x"))
    await reg.get("x").wait_finished()
    with pytest.raises(CursorExpiredError):
        await reg.resume("x", "x:1", None)
    assert reg.get("x").subscribers == 0


async def test_threads_are_kept_in_the_store_given_not_in_the_log() -> None:
    store = MemoryThreadStore()
    log = InMemoryEventLog()
    reg = RunRegistry(ScriptedAgent(deltas=2), log=log, threads=store)
    first = await reg.start(make_input("one"))
    await first.wait_finished()
    assert len(store) == 1 and len(log.threads) == 0
    follow = RunAgentInput(
        thread_id="thread-1", run_id="two", messages=[UserMessage(id="u2", content="more")], parent_run_id="one"
    )
    await (await reg.start(follow, key=first.key)).wait_finished()
    found, payloads = await reg.thread_history("thread-1", caller=Caller(None, first.key))
    assert found.tip == "two" and [r.run_id for r in found.runs] == ["one", "two"]
    assert decode_event(payloads[0]).type.value == "RUN_STARTED"
    off = RunRegistry(ScriptedAgent(deltas=1), threads=store, options=RegistryOptions(keep_history=False))
    with pytest.raises(UnknownThreadError, match="keeps no thread history"):
        await off.thread_history("thread-1")


def _imports(path: Path) -> set[str]:
    """The transport modules ``path`` imports, wherever the import is written (function
    bodies and ``TYPE_CHECKING`` blocks included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif node.module == PACKAGE:
                found |= {a.name for a in node.names}
            elif node.module and node.module.startswith(PACKAGE + "."):
                found.add(node.module[len(PACKAGE) + 1 :].split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {a.name[len(PACKAGE) + 1 :].split(".")[0] for a in node.names if a.name.startswith(PACKAGE + ".")}
    return found


def test_no_import_cycle_among_the_transports_modules() -> None:
    modules = {p.stem: p for p in TRANSPORTS.glob("*.py") if p.stem != "__init__"}
    edges = {name: _imports(path) & set(modules) - {name} for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(name) :], name]))
        if name in done:
            return
        for other in sorted(edges[name]):
            visit(other, [*path, name])
        done.add(name)

    for name in sorted(modules):
        visit(name, [])
    assert {"sse_server", "sse_client", "runs"} <= done


@pytest.mark.parametrize(
    ("server", "client"),
    [("sse_server", "sse_client"), ("websocket_server", "websocket_client"), ("stdio_server", "stdio_client")],
)
def test_no_server_imports_its_client_nor_a_client_its_server(server: str, client: str) -> None:
    assert client not in _imports(TRANSPORTS / f"{server}.py")
    assert server not in _imports(TRANSPORTS / f"{client}.py")
    assert "runs" not in _imports(TRANSPORTS / f"{client}.py")  # a client needs no registry


def test_the_registry_imports_nothing_from_genui() -> None:
    tree = ast.parse((TRANSPORTS / "runs.py").read_text(encoding="utf-8"))
    named = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not [m for m in named if m.startswith("agui_engine.genui")]
    assert not {"aiohttp", "websockets", "starlette"} & {m.split(".")[0] for m in named}


def test_the_http_server_uses_only_aiohttps_public_names() -> None:
    """The idle-connection gate and the JSON 400 for an unreadable request go through a
    protocol factory of our own (``loop.create_server`` + a ``web.RequestHandler`` subclass):
    no import of aiohttp's ``web_*`` modules, no handler class swapped, no method patched."""
    source = (TRANSPORTS / "sse_server.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not [m for m in modules if m.startswith("aiohttp.")]
    assigned = [
        target.attr
        for node in ast.walk(tree) if isinstance(node, ast.Assign)
        for target in node.targets if isinstance(target, ast.Attribute)
    ]
    assert "__class__" not in assigned and "connection_made" not in assigned and "connection_lost" not in assigned
