"""The layers, and what each may import; the folders are the layers.

    core (agui_engine/, minus adapters/, transports/, cli/)
        <-  adapters (agui_engine/adapters/)
        <-  transports (agui_engine/transports/)
        <-  cli (agui_engine/cli/, and agui_engine/__main__.py)

and inside the core, bottom to top, one folder (or top-level module) a layer:

    protocol/   events, codecs, verifier, accumulator, errors, pointers, the Agent contract
    jsonstream  the incremental JSON tokenizer (JSON-level: it knows no AG-UI event)
    llm         the LLM client contract (types a model adapter and a tool speak)
    genui/      components, their streams, interactables, the UI spec tree, resources
    loops/      the decision loop, LLMAgent, the agent loop, prompts, tool runner, Thread
    demo/       the scripted demo models

* each core layer imports only the layers below it (``jsonstream`` and ``llm`` are
  side by side: neither imports the other), and the core does no IO: no network,
  subprocess, thread, clock, file or terminal;
* the package ``agui_engine`` itself (``__init__``) re-exports from every core layer;
* the adapters import the core;
* the transports import the core: they carry any agent, so they import neither
  the adapters nor the CLI (choosing an agent from a spec string is the CLI's job);
* the CLI may import everything.

A module's layer is read from its folder (``layer_of``): a new module is placed by where it
is put, never by a list to keep up to date; a new folder of the core must be given a layer
here or the test fails.

An import is read wherever it is written: a module-level or a lazy (in-function)
``import``, a relative one, a literal ``importlib.import_module("...")`` /
``__import__("...")``, and any string literal naming a project module
(``"agui_engine.cli.agent_spec:load_sse"`` in the agent-spec table), so that an
import by string cannot hide a dependency; a logger's name (``logging.getLogger("agui_engine.transports")``)
names a channel, not a module, and is not an import.

The modules import one another without a cycle (``test_no_module_imports_itself_through_others``):
every import counts, type-checking-only, lazy and string ones included.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the one package; every folder is its import path
PACKAGE = "agui_engine"

CORE, ADAPTERS, TRANSPORTS, CLI = "core", "adapters", "transports", "cli"
PROTOCOL, TOKENIZER, LLM_CONTRACT, GENUI, LOOPS, DEMO = "protocol", "jsonstream", "llm", "genui", "loops", "demo"

#: The core's layers, bottom to top: a subfolder of agui_engine/ or a top-level module of it.
CORE_LAYER_OF_FOLDER = {"protocol": PROTOCOL, "genui": GENUI, "loops": LOOPS, "demo": DEMO}
CORE_LAYER_OF_MODULE = {"jsonstream": TOKENIZER, "llm": LLM_CONTRACT, "_lazy": PROTOCOL}
CORE_LAYERS = {PROTOCOL, TOKENIZER, LLM_CONTRACT, GENUI, LOOPS, DEMO, CORE}

#: layer -> layers it may import
ALLOWED = {
    PROTOCOL: {PROTOCOL},
    TOKENIZER: {PROTOCOL, TOKENIZER},
    LLM_CONTRACT: {PROTOCOL, LLM_CONTRACT},
    GENUI: {PROTOCOL, TOKENIZER, LLM_CONTRACT, GENUI},
    LOOPS: {PROTOCOL, TOKENIZER, LLM_CONTRACT, GENUI, LOOPS},
    DEMO: {PROTOCOL, TOKENIZER, LLM_CONTRACT, GENUI, LOOPS, DEMO},
    CORE: CORE_LAYERS,  # the package __init__: the public names of every core layer
    ADAPTERS: CORE_LAYERS | {ADAPTERS},
    TRANSPORTS: CORE_LAYERS | {TRANSPORTS},
    CLI: CORE_LAYERS | {ADAPTERS, TRANSPORTS, CLI},
}

#: Libraries and standard modules that do IO (network, processes, threads, clock,
#: files, terminal). The core imports none of them, anywhere.
CORE_FORBIDDEN_MODULES = {
    "aiohttp", "httpx", "websockets", "redis", "langgraph", "langchain_core", "crewai",
    "socket", "ssl", "selectors", "asyncio.subprocess", "subprocess", "multiprocessing", "threading",
    "concurrent", "urllib.request", "http.client", "time", "os", "pathlib", "shutil", "io",
    "tempfile", "signal",
}  # fmt: skip
#: ``asyncio`` is the core's concurrency model (async generators, cancellation),
#: but these of its functions touch a thread, the clock or the network.
CORE_FORBIDDEN_ASYNCIO = {
    "sleep", "to_thread", "timeout", "timeout_at", "wait_for", "get_running_loop", "get_event_loop", "run",
    "open_connection", "start_server", "create_subprocess_exec", "create_subprocess_shell",
}  # fmt: skip
#: ``sys`` is fine (``sys.modules``), but not its terminal and process parts.
CORE_FORBIDDEN_SYS = {"stdin", "stdout", "stderr", "argv", "exit"}
#: Built-ins that do terminal or file IO.
CORE_FORBIDDEN_BUILTINS = {"print", "open", "input", "breakpoint"}

#: A string that names a project module (optionally ``:attribute``), as a spec table does.
PROJECT_MODULE_STRING = re.compile(r"^agui_engine(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


@functools.cache
def _files() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def layer_of(module: str) -> str | None:
    """The layer of a project module (read from its folder), None for anything else."""
    if module == "agui_engine.__main__" or module == "agui_engine.cli" or module.startswith("agui_engine.cli."):
        return CLI
    if module == "agui_engine.adapters" or module.startswith("agui_engine.adapters."):
        return ADAPTERS
    if module == "agui_engine.transports" or module.startswith("agui_engine.transports."):
        return TRANSPORTS
    if module == "agui_engine":
        return CORE
    if module.startswith("agui_engine."):
        first = module.split(".")[1]
        layer = CORE_LAYER_OF_FOLDER.get(first) or CORE_LAYER_OF_MODULE.get(first)
        assert layer is not None, f"{module}: agui_engine/{first} is in no layer of the core (tests/test_layers.py)"
        return layer
    return None


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path | None = None) -> Iterator[tuple[int, str]]:
    """``(line, imported module)`` for every import ``module`` (read from ``path``,
    default its source file) writes; see the module docstring."""
    path = path or _files()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    logger_names = {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and node.args
        and (isinstance(node.func, ast.Attribute) and node.func.attr == "getLogger"
             or isinstance(node.func, ast.Name) and node.func.id == "getLogger")
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path, node) if node.level else (node.module or "")
            yield node.lineno, target
            for alias in node.names:  # `from agui_engine import demo` imports a module
                yield node.lineno, f"{target}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            )
        ):
            yield node.lineno, node.args[0].value
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in logger_names
              and PROJECT_MODULE_STRING.match(node.value)):
            named = node.value.partition(":")[0]
            if _existing(named) == named:  # a module's name, not an event name such as "agui_engine.tool_call.status"
                yield node.lineno, named


def _existing(module: str) -> str | None:
    """``module`` if it is a project module, else its longest project-module prefix
    (``agui_engine.protocol.events.RunErrorEvent`` from ``from agui_engine.protocol.events import RunErrorEvent``)."""
    files = _files()
    parts = module.split(".")
    while parts:
        name = ".".join(parts)
        if name in files:
            return name
        parts.pop()
    return None


def _layer_violations() -> list[str]:
    bad = []
    for module, path in _files().items():
        own = layer_of(module)
        assert own is not None
        for line, target in imports_of(module):
            found = _existing(target)  # `from agui_engine import __version__` names a value, not a module
            their = layer_of(found) if found is not None else None
            if their is not None and their not in ALLOWED[own]:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {target} ({their})")
    return bad


def test_every_layer_imports_only_the_layers_below_it() -> None:
    assert _layer_violations() == []


def test_the_core_does_no_io() -> None:
    bad = []
    for module, path in _files().items():
        if layer_of(module) not in CORE_LAYERS:
            continue
        for line, target in imports_of(module):
            if any(target == f or target.startswith(f + ".") for f in CORE_FORBIDDEN_MODULES):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "asyncio"
                and node.attr in CORE_FORBIDDEN_ASYNCIO
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} calls asyncio.{node.attr}")
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
                and node.attr in CORE_FORBIDDEN_SYS
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} uses sys.{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CORE_FORBIDDEN_BUILTINS:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {node.func.id}()")
    assert bad == []


def test_the_core_folders_are_layers_bottom_to_top() -> None:
    """Every folder of the core is a layer, and the layers are what the docstring draws."""
    folders = {p.name for p in (ROOT / "agui_engine").iterdir() if (p / "__init__.py").exists()}
    assert folders - {"cli", "adapters", "transports"} == set(CORE_LAYER_OF_FOLDER)
    modules = {p.stem for p in (ROOT / "agui_engine").glob("*.py")} - {"__init__", "__main__"}
    assert modules == set(CORE_LAYER_OF_MODULE)
    assert layer_of("agui_engine.genui.components") == GENUI and layer_of("agui_engine.protocol.events") == PROTOCOL


def test_the_rules_catch_lazy_relative_and_string_imports(tmp_path: Path) -> None:
    """The reader itself: every way of writing an import is seen."""
    sample = textwrap.dedent(
        '''
        import importlib
        from .. import adapters
        TABLE = {"x": "agui_engine.cli.agent_spec:load_sse"}
        def f():
            from ..cli import agent_spec
            importlib.import_module("agui_engine.adapters.models")
        '''
    )
    probe = tmp_path / "probe.py"
    probe.write_text(sample, encoding="utf-8")
    found = {t for _, t in imports_of("agui_engine.transports.probe", probe)}
    assert {"agui_engine.adapters", "agui_engine.cli.agent_spec", "agui_engine.cli", "agui_engine.adapters.models"} <= found


def _imported_modules(module: str) -> set[str]:
    """The project modules ``module`` imports. ``from agui_engine.adapters import mcp_sdk`` imports
    the submodule: the package it names on the way is Python's import order, not an edge (a name
    the package itself exports, ``from agui_engine.adapters import MCPServer``, is one)."""
    by_line: dict[int, set[str]] = {}
    for line, target in imports_of(module):
        found = _existing(target)
        if found is not None:
            by_line.setdefault(line, set()).add(found)
    return {found for names in by_line.values() for found in names
            if not any(other.startswith(found + ".") for other in names)}


def import_cycles() -> list[list[str]]:
    """The import cycles of the package: each a strongly connected component (more than one
    module, every import counted; see the module docstring) of the graph module -> the project
    modules it imports, found by Tarjan's algorithm. Importing a submodule runs its package's
    ``__init__`` too, but that is Python's import order, not a dependency the module wrote:
    only the imports written in the source are edges."""
    graph = {module: sorted(_imported_modules(module) - {module}) for module in _files()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:  # iterative Tarjan: the import graph may be deeper than the recursion limit
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph[successor])))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return sorted(cycles)


def test_no_module_imports_itself_through_others() -> None:
    assert import_cycles() == []


def test_the_cycle_count_sees_lazy_string_and_type_checking_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter itself: a cycle written with a lazy import, a string or under ``TYPE_CHECKING``
    is a cycle; a logger's name is not an import."""
    ring = {
        "agui_engine.genui.ring_a": "def f():\n    from . import ring_b\n",
        "agui_engine.genui.ring_b": 'import importlib\nimportlib.import_module("agui_engine.genui.ring_c")\n',
        "agui_engine.genui.ring_c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .ring_a import f\n",
        "agui_engine.genui.logs_a": 'import logging\nlogging.getLogger("agui_engine.genui.logs_b")\n',
        "agui_engine.genui.logs_b": "from . import logs_a\n",
    }
    files = dict(_files())
    for module, source in ring.items():
        path = tmp_path / f"{module.rpartition('.')[2]}.py"
        path.write_text(source, encoding="utf-8")
        files[module] = path
    monkeypatch.setattr(sys.modules[__name__], "_files", lambda: files)
    assert ["agui_engine.genui.ring_a", "agui_engine.genui.ring_b", "agui_engine.genui.ring_c"] in import_cycles()
    assert not [cycle for cycle in import_cycles() if "agui_engine.genui.logs_a" in cycle]


def _import_closure(start: str) -> set[str]:
    """Project modules reachable from ``start`` by any import (lazy ones too)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for _, target in imports_of(module):
            found = _existing(target)
            if found is not None and found not in seen:
                todo.append(found)
    seen.discard("agui_engine")  # the package __init__ re-exports; importing a submodule does not need it
    return seen


def test_the_tokenizer_knows_json_not_ag_ui() -> None:
    """Statically: nothing ``agui_engine.jsonstream`` can reach imports the event model."""
    closure = _import_closure("agui_engine.jsonstream")
    assert "agui_engine.protocol.events" not in closure, sorted(closure)
    # the error tree and RFC 6901 pointer tokens (agui_engine.protocol.pointer) are JSON-level, not AG-UI
    assert closure <= {"agui_engine.jsonstream", "agui_engine.protocol.errors", "agui_engine.protocol.pointer"}, sorted(closure)


def test_importing_the_tokenizer_alone_loads_no_event_model() -> None:
    """At run time, in a fresh interpreter: the tokenizer module loaded from its file
    (the package ``__init__`` re-exports everything, so it is bypassed), fed a
    document and made to raise, never loads ``agui_engine.protocol.events``."""
    code = textwrap.dedent(
        f"""
        import importlib, sys, types
        package = types.ModuleType("agui_engine")
        package.__path__ = [{str(ROOT / "agui_engine")!r}]
        sys.modules["agui_engine"] = package
        jsonstream = importlib.import_module("agui_engine.jsonstream")
        stream = jsonstream.PatchStream()
        stream.feed('{{"a": [1, 2')
        try:
            stream.feed("}}")
        except Exception as exc:
            assert type(exc).__module__ == "agui_engine.jsonstream", exc
        else:
            raise AssertionError("no error for bad JSON")
        loaded = sorted(m for m in sys.modules if m.startswith("agui_engine"))
        assert loaded == ["agui_engine", "agui_engine.jsonstream", "agui_engine.protocol", "agui_engine.protocol.errors", "agui_engine.protocol.pointer"], loaded
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_pure_core_does_not_use_asyncio() -> None:
    """The tokenizer, codecs, verifier, accumulator and event model are plain
    feed/close state machines: no event loop at all."""
    pure = ["jsonstream", *(f"protocol.{name}" for name in ("pointer", "codec", "verify", "accumulator", "events", "errors"))]
    bad = [
        f"{name}:{line} imports {target}"
        for name in pure
        for line, target in imports_of(f"agui_engine.{name}")
        if target.split(".")[0] == "asyncio"
    ]
    assert bad == []


def test_the_package_is_typed() -> None:
    assert (ROOT / PACKAGE / "py.typed").exists()
