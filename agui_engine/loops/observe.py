"""The tracing hook: what the core tells an observer (OpenTelemetry) about a run, without doing IO.

Theory of operation
-------------------
The core never imports a tracing library. It calls three functions of this module where
the things happen: :func:`model_span` around each model call (the decision loop),
:func:`tool_span` around each server tool and MCP tool call (``tool_outcome``), and
:func:`trace_headers` where an adapter or a client is about to send an HTTP request (a
provider, a remote AG-UI agent, an MCP server) so the W3C ``traceparent`` goes with it.
Each reads one context variable, :data:`OBSERVER`: ``None`` (the default: tracing off)
makes every call a no-op that returns ``None`` / ``{}``, one ``ContextVar.get`` per model
or tool call, nothing per event.

A transport that traces (the run registry with ``RegistryOptions(tracing=True)``) sets
:data:`OBSERVER` in the task that runs the agent, to an :class:`Observer` of its own
(``agui_engine.transports.otel.OTelObserver``, over the OpenTelemetry API): every model
and tool call of that run then lands in its trace as a child of the run's
``invoke_agent`` span. What a span is named and which attributes it carries follow the
OpenTelemetry GenAI semantic conventions (the names are this module's constants).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Literal, Protocol

__all__ = [
    "AttributeValue",
    "OBSERVER",
    "Observer",
    "SpanHandle",
    "SpanKind",
    "model_span",
    "tool_span",
    "trace_headers",
]

#: What a span attribute may hold (the OpenTelemetry attribute types).
AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
#: ``client``: a call out of this process (a model, a remote agent); ``internal``: work here.
SpanKind = Literal["client", "internal", "server"]


class SpanHandle(Protocol):
    """One open span: attributes may be added while it is open; :meth:`end` closes it once."""

    def set(self, key: str, value: AttributeValue) -> None: ...

    def end(self, error: str | None = None) -> None:
        """Close the span; ``error`` (its ``error.type``) marks it failed."""
        ...


class Observer(Protocol):
    """What a tracing back end implements (``transports/otel.py``: OpenTelemetry)."""

    def start(self, name: str, kind: SpanKind, attributes: Mapping[str, AttributeValue]) -> SpanHandle:
        """Open a span as the child of the current one, and make it current until its end."""
        ...

    def headers(self) -> dict[str, str]:
        """The propagation headers of the current span (``traceparent``, ``tracestate``)."""
        ...


#: The observer of the run being served in this task (None: tracing off).
OBSERVER: ContextVar[Observer | None] = ContextVar("agui_engine_observer", default=None)


def trace_headers() -> dict[str, str]:
    """The W3C trace context headers to send with an outgoing request of this run
    (``{}`` when tracing is off or nothing is being traced)."""
    observer = OBSERVER.get()
    return observer.headers() if observer is not None else {}


def model_span(llm: object) -> SpanHandle | None:
    """A ``chat {model}`` span (GenAI ``chat`` operation) for one call of ``llm``, or None
    when tracing is off. ``llm``'s ``provider`` and ``model`` attributes name it (``name``
    when it has no ``model``: a ScriptedModel); the caller adds the response model, token
    usage and finish reasons before its end."""
    observer = OBSERVER.get()
    if observer is None:
        return None
    model = getattr(llm, "model", None) or getattr(llm, "name", None)
    provider = getattr(llm, "provider", None)
    attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
    if isinstance(provider, str) and provider:
        attributes["gen_ai.provider.name"] = provider
    if isinstance(model, str) and model:
        attributes["gen_ai.request.model"] = model
    name = f"chat {model}" if isinstance(model, str) and model else "chat"
    return observer.start(name, "client", attributes)


def tool_span(name: str, call_id: str | None, *, description: str | None = None) -> SpanHandle | None:
    """An ``execute_tool {name}`` span for one server tool or MCP tool call, or None when
    tracing is off."""
    observer = OBSERVER.get()
    if observer is None:
        return None
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
    }
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    if description:
        attributes["gen_ai.tool.description"] = description
    return observer.start(f"execute_tool {name}", "internal", attributes)
