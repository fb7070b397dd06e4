"""The capability Structs against the official Python SDK's pydantic models
(``ag_ui.core.capabilities``, ag-ui-protocol 1.0.0): the same fields, and values both ways."""

from __future__ import annotations

import json
import subprocess
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ag_ui.core import capabilities as sdk
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agui_engine.protocol import capabilities as caps
from agui_engine.protocol.capabilities import (
    AgentCapabilities,
    CapabilitiesDecodeError,
    ExecutionCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    MultimodalOutputCapabilities,
    ReasoningCapabilities,
    StateCapabilities,
    SubagentInfo,
    ToolsCapabilities,
    TransportCapabilities,
    decode_capabilities,
    encode_capabilities,
    merge_capabilities,
)
from agui_engine.protocol.errors import RemoteInputError
from agui_engine.protocol.events import MAX_SAFE_INTEGER, Tool
from tests.helpers import node_with

NAMES = [name for name in sdk.__all__ if name != "SubAgentInfo"]  # SubAgentInfo: the SDK's 0.x alias
PAIRS: list[tuple[type, type[BaseModel]]] = [(getattr(caps, name), getattr(sdk, name)) for name in NAMES]

#: Any JSON value (no NaN: JSON has none), a few levels deep; numbers within what every JSON
#: peer reads exactly (a JavaScript number: integers to 2**53, and doubles, which JS prints in
#: their shortest round-trip form -- past 2**53 an integral double's digits are JS's to choose).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(min_value=-(2.0**53), max_value=2.0**53, allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def _strategy(hint: Any) -> st.SearchStrategy[Any]:
    """Values of a capability field's type (drawn from the type itself: a new field is covered)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        assert len(inner) == 1, hint
        return st.none() | _strategy(inner[0])
    if origin is typing.Annotated:  # the bounded integers
        return st.integers(0, MAX_SAFE_INTEGER)
    if origin is list:
        return st.lists(_strategy(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), json_values, max_size=3)
    if hint is bool:
        return st.booleans()
    if hint is str:
        return st.text(max_size=12)
    if hint is Any:
        return json_values
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        hints = typing.get_type_hints(hint, include_extras=True)
        return st.builds(hint, **{f.name: _strategy(hints[f.name]) for f in msgspec.structs.fields(hint)})
    raise AssertionError(f"no strategy for {hint!r}")


documents = _strategy(AgentCapabilities)


def _fields(model: type[BaseModel]) -> dict[str, bool]:
    return {(info.alias or name): info.is_required() for name, info in model.model_fields.items()}


def test_every_sdk_capability_type_has_its_struct() -> None:
    assert len(PAIRS) == 14
    assert set(caps.__all__) >= set(NAMES)


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=lambda c: c.__name__)
def test_fields_match_the_sdk_in_order_and_required_ness(ours: type, theirs: type[BaseModel]) -> None:
    mine = {f.encode_name: f.required for f in msgspec.structs.fields(ours)}
    theirs_fields = {
        (info.serialization_alias or info.alias or name): info.is_required() for name, info in theirs.model_fields.items()
    }
    assert list(mine) == list(theirs_fields)
    assert mine == theirs_fields
    config = ours.__struct_config__
    assert config.frozen and config.omit_defaults
    with pytest.raises(TypeError):  # keyword-only
        ours("x")
    assert ours.__name__ == theirs.__name__


@settings(deadline=None)
@given(documents)
def test_ours_encoded_validate_with_the_sdk_and_come_back_equal(value: AgentCapabilities) -> None:
    data = encode_capabilities(value)
    model = sdk.AgentCapabilities.model_validate_json(data)
    # the SDK writes back exactly what we wrote (it omits what is unset, as we do)
    assert msgspec.json.decode(model.model_dump_json(by_alias=True)) == msgspec.json.decode(data)
    assert decode_capabilities(model.model_dump_json(by_alias=True)) == value


@settings(deadline=None)
@given(documents)
def test_sdk_models_built_with_python_names_decode_with_ours_equal(value: AgentCapabilities) -> None:
    # Build the SDK's model from Python (snake_case) names, as an SDK user does, then dump it.
    model = sdk.AgentCapabilities.model_validate(msgspec.to_builtins(value, builtin_types=()) and _snake(value))
    assert decode_capabilities(model.model_dump_json(by_alias=True)) == value


def _snake(value: Any) -> Any:
    """``value`` as SDK constructor keywords: attribute (snake_case) names, nested."""
    if isinstance(value, msgspec.Struct):
        return {f.name: _snake(getattr(value, f.name)) for f in msgspec.structs.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def test_a_full_document_round_trips_and_writes_camel_case() -> None:
    doc = AgentCapabilities(
        identity=IdentityCapabilities(name="w", type="agui-engine", documentation_url="https://x", metadata={"k": None}),
        transport=TransportCapabilities(streaming=True, websocket=False, http_binary=True, resumable=True),
        tools=ToolsCapabilities(supported=True, items=[Tool(name="t", description="d", parameters={"type": "object"})],
                                parallel_calls=True, client_provided=True),
        state=StateCapabilities(snapshots=True, deltas=True, persistent_state=True),
        reasoning=ReasoningCapabilities(supported=True, streaming=True, encrypted=False),
        multimodal=MultimodalCapabilities(input=MultimodalInputCapabilities(image=True),
                                          output=MultimodalOutputCapabilities(audio=False)),
        execution=ExecutionCapabilities(max_iterations=10, max_execution_time=0),
        human_in_the_loop=HumanInTheLoopCapabilities(interrupts=True, approve_with_edits=False),
        custom={"x": [1, None]},
    )
    data = encode_capabilities(doc)
    assert b'"httpBinary":true' in data and b'"humanInTheLoop"' in data and b'"documentationUrl"' in data
    assert b'"approveWithEdits":false' in data  # a declared False is written: it means unsupported
    assert decode_capabilities(data) == doc
    assert encode_capabilities(AgentCapabilities()) == b"{}"


@pytest.mark.parametrize(
    "data,where",
    [
        (b'{"tools": {"supported": "yes"}}', "$.tools.supported"),
        (b'{"tools": {"items": [{"name": "t"}]}}', "$.tools.items[0]"),
        (b'{"execution": {"maxIterations": -1}}', "$.execution.maxIterations"),
        (b'{"execution": {"maxIterations": 9007199254740992}}', "$.execution.maxIterations"),
        (b'{"multiAgent": {"subagents": [{}]}}', "$.multiAgent.subagents[0]"),
        (b'{"custom": []}', "$.custom"),
        (b'[]', "$"),
    ],
)
def test_bad_documents_are_refused_with_their_json_path_as_the_sdk_refuses_them(data: bytes, where: str) -> None:
    with pytest.raises(CapabilitiesDecodeError) as info:
        decode_capabilities(data, where="GET /capabilities")
    assert isinstance(info.value, RemoteInputError)
    assert info.value.code == "invalid_capabilities"
    assert where in info.value.message and "GET /capabilities" in info.value.message
    with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError
        sdk.AgentCapabilities.model_validate_json(data) if where != "$.tools.supported" else _strict(data)


def _strict(data: bytes) -> None:
    # pydantic coerces "yes" to True by default; in strict mode it refuses as msgspec does
    sdk.AgentCapabilities.model_validate_json(data, strict=True)


def test_malformed_json_is_refused_with_the_byte_offset() -> None:
    with pytest.raises(CapabilitiesDecodeError, match="not JSON.*byte 9"):
        decode_capabilities(b'{"tools":x}')
    with pytest.raises(CapabilitiesDecodeError, match="not JSON.*truncated"):
        decode_capabilities(b'{"tools":')


def test_unknown_members_are_dropped_like_the_events_unknown_fields() -> None:
    assert decode_capabilities(b'{"future": 1, "tools": {"x": 2, "supported": true}}') == AgentCapabilities(
        tools=ToolsCapabilities(supported=True)
    )


def test_merge_lays_categories_over_each_other() -> None:
    base = AgentCapabilities(
        tools=ToolsCapabilities(supported=True, items=[Tool(name="a", description="1"), Tool(name="b", description="1")]),
        multimodal=MultimodalCapabilities(input=MultimodalInputCapabilities(image=True)),
        custom={"a": 1, "b": 1},
        state=StateCapabilities(snapshots=True),
    )
    over = AgentCapabilities(
        tools=ToolsCapabilities(items=[Tool(name="b", description="2"), Tool(name="c", description="2")]),
        multimodal=MultimodalCapabilities(input=MultimodalInputCapabilities(pdf=False)),
        custom={"b": 2},
        transport=TransportCapabilities(streaming=True),
    )
    merged = merge_capabilities(base, over)
    assert merged.tools == ToolsCapabilities(
        supported=True,
        items=[Tool(name="a", description="1"), Tool(name="b", description="2"), Tool(name="c", description="2")],
    )
    assert merged.multimodal == MultimodalCapabilities(input=MultimodalInputCapabilities(image=True, pdf=False))
    assert merged.custom == {"a": 1, "b": 2}
    assert merged.state == base.state and merged.transport == over.transport
    assert merge_capabilities(base, AgentCapabilities()) is base
    assert base.tools is not None and len(base.tools.items or ()) == 2  # unchanged
    assert SubagentInfo(name="x") == decode_capabilities(b'{"multiAgent":{"subagents":[{"name":"x"}]}}').multi_agent.subagents[0]  # type: ignore[union-attr,index]


# --------------------------------------------------------------------------- @ag-ui/core under node

JS_DIR = Path(__file__).resolve().parents[2] / "js"


def _zod(documents: list[Any]) -> list[dict[str, Any]]:
    """@ag-ui/core 1.0.0's AgentCapabilitiesSchema.safeParse of each document, in one node process."""
    node = node_with("@ag-ui/core")
    done = subprocess.run([node, "capabilities_schema.mjs"], cwd=JS_DIR, input=json.dumps(documents),
                          capture_output=True, text=True, timeout=120, check=True)
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


@settings(max_examples=4, deadline=None)
@given(st.lists(documents, min_size=40, max_size=40))
def test_ours_encoded_parse_with_the_typescript_schema_unchanged(values: list[AgentCapabilities]) -> None:
    wire = [msgspec.json.decode(encode_capabilities(v)) for v in values]
    for value, sent, result in zip(values, wire, _zod(wire)):
        assert "ok" in result, result
        assert result["ok"] == sent
        assert decode_capabilities(json.dumps(result["ok"])) == value


def test_the_typescript_schema_refuses_what_ours_refuses() -> None:
    bad = [{"execution": {"maxIterations": -1}}, {"tools": {"items": [{"name": "t"}]}},
           {"multiAgent": {"subagents": [{}]}}, {"custom": []}, {"tools": {"supported": "yes"}}]
    for doc, result in zip(bad, _zod(bad)):
        assert "error" in result, doc
        with pytest.raises(CapabilitiesDecodeError):
            decode_capabilities(json.dumps(doc))
