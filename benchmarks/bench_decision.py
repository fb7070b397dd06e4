"""The decision loop's cost per model chunk, against its floor and a Tambo-style re-parsing loop.

One model step that shows a component whose arguments (a dashboard document from
:mod:`agui_engine.cli.bench`, standard parameters first) arrive in token-sized chunks:

* ``ours``: :func:`agui_engine.loops.decision.run_decision_loop` over a scripted model --
  everything a step does per chunk: parse once (ComponentStream over the tokenizer),
  rewrite the fragment for the wire (no standard parameters), build the
  ``TOOL_CALL_ARGS`` and ``props_delta`` events and the decision.
* ``component-stream-only``: the :class:`ComponentStream` alone, fed the same chunks:
  the floor, to show what the loop adds around it.
* ``tambo-style-loop``: what Tambo's ``runDecisionLoop`` does per chunk (generative-ui-peers
  §4): re-parse the whole argument prefix with a partial-JSON parser
  (``partial_json_parser``), read the status messages, filter the props to the
  schema's keys. Once per chunk (upstream also re-parses twice more in its tracker),
  and without building any event -- so the ratio understates the difference. The
  re-parse grows with the prefix, so it runs on the 4 KB document only.

Run ``pytest benchmarks/bench_decision.py --benchmark-enable --benchmark-only``; the
summary prints each alternative's median as a ratio to ours (benchmarks/conftest.py).
In CI (``--benchmark-disable``) each case runs once and checks the final props agree.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agui_engine.cli.bench_corpus import make_documents, split_chunks
from agui_engine.genui.component_stream import ComponentStream
from agui_engine.genui.components import Component
from agui_engine.llm import (
    Finish,
    LLMStreamItem,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from agui_engine.loops.decision import run_decision_loop
from agui_engine.protocol.events import UserMessage

partial_json_parser = pytest.importorskip("partial_json_parser")

DOCUMENTS = ("dashboard-4KB", "dashboard-16KB")
RE_PARSED = frozenset({"dashboard-4KB"})  # quadratic: larger documents would only measure the growth
FREE_FORM = Component("Dashboard", "A dashboard", {"type": "object", "properties": {}, "additionalProperties": True})
_DOCS = make_documents()


def _case(name: str) -> tuple[dict[str, Any], list[str]]:
    props = json.loads(_DOCS[name])
    text = json.dumps({"_tambo_statusMessage": "Building the dashboard",
                       "_tambo_completionStatusMessage": "Built the dashboard", **props}, ensure_ascii=False)
    return props, split_chunks(text)


class _Scripted:
    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    def complete(self, messages: Any, tools: Any, tool_choice: str = "auto", **_: Any) -> AsyncIterator[LLMStreamItem]:
        async def stream() -> AsyncIterator[LLMStreamItem]:
            yield ToolCallStart(index=0, id="call_1", name="show_component_Dashboard")
            for chunk in self.chunks:
                yield ToolCallArgsDelta(index=0, delta=chunk)
            yield ToolCallEnd(index=0)
            yield Finish(reason="tool_calls")

        return stream()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


def _ours(loop: asyncio.AbstractEventLoop, chunks: list[str]) -> dict[str, Any]:
    async def step() -> dict[str, Any]:
        decision = None
        async for item in run_decision_loop(_Scripted(chunks), [UserMessage(id="u", content="dashboard")],
                                            components=[FREE_FORM]):
            decision = item.decision
        assert decision is not None and decision.props is not None
        return decision.props

    return loop.run_until_complete(step())


def _component_stream_only(chunks: list[str]) -> dict[str, Any]:
    stream = ComponentStream(FREE_FORM, message_id="m", component_id="c")
    stream.start()
    for chunk in chunks:
        stream.feed(chunk)
    stream.close()
    assert stream.final_props is not None
    return stream.final_props


def _tambo_style_loop(chunks: list[str]) -> dict[str, Any]:
    accumulated = ""
    props: dict[str, Any] = {}
    for chunk in chunks:
        accumulated += chunk
        try:
            args = partial_json_parser.loads(accumulated)
        except Exception:  # noqa: BLE001, S112 - upstream ignores parse failures of a prefix
            continue
        if isinstance(args, dict):
            args.get("_tambo_statusMessage")
            args.get("_tambo_completionStatusMessage")
            props = {k: v for k, v in args.items() if not k.startswith("_tambo_")}
    return props


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("impl", ["ours", "component-stream-only", "tambo-style-loop"])
def test_decision_step(benchmark: Any, loop: asyncio.AbstractEventLoop, document: str, impl: str) -> None:
    if impl == "tambo-style-loop" and document not in RE_PARSED:
        pytest.skip("the re-parsing loop is quadratic; measured on the 4 KB document only")
    props, chunks = _case(document)
    benchmark.group = f"decision-step {document} ({len(chunks)} chunks)"
    if impl == "ours":
        result = benchmark(_ours, loop, chunks)
    elif impl == "component-stream-only":
        result = benchmark(_component_stream_only, chunks)
    else:
        result = benchmark(_tambo_style_loop, chunks)
    assert result == props
