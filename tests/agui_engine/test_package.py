"""The package's public API: every public name of every library module is
re-exported from ``agui_engine`` with the same object, and ``__all__`` lists
exactly those names."""

from __future__ import annotations

import subprocess
import sys

import agui_engine


def test_all_is_the_union_of_the_public_modules() -> None:
    expected = {name for module in agui_engine.PUBLIC_MODULES for name in module.__all__} | {"__version__"}
    assert set(agui_engine.__all__) == expected
    assert len(agui_engine.__all__) == len(set(agui_engine.__all__))


def test_every_exported_name_is_the_submodule_object() -> None:
    for module in agui_engine.PUBLIC_MODULES:
        for name in module.__all__:
            assert getattr(agui_engine, name) is getattr(module, name), (module.__name__, name)


def test_core_names_users_reach_for() -> None:
    for name in [
        "PatchStream", "JSONStreamError", "Verifier", "Accumulator", "SSEDecoder", "EventStreamDecoder",
        "encode_sse", "decode_event", "RunAgentInput", "Event", "Component", "ComponentStream",
        "run_decision_loop", "LLMAgent", "EmbeddedModel", "LLMClient", "Agent", "RemoteInputError",
    ]:
        assert name in agui_engine.__all__


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from agui_engine import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(agui_engine.__all__)


def test_importing_the_core_pulls_in_no_io_library() -> None:
    code = (
        "import sys, agui_engine; "
        "bad = [m for m in ('aiohttp', 'httpx', 'websockets', 'agui_engine.transports', 'agui_engine.adapters') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
