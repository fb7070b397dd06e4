"""A deterministic model that ships with the engine: the demo's and the tests' default LLM.

Theory of operation
-------------------
:class:`EmbeddedModel` is an :class:`~agui_engine.llm.LLMClient` that needs no
network and no API key. Each ``complete()`` call does two things:

1. **Plan** (pure, :func:`plan_reply`): read the conversation -- the last user
   message, the tool calls and tool results that followed it -- and the tools
   offered, and decide the reply: optional reasoning, text, and tool calls with
   their complete JSON arguments. The scenarios:

   * *weather* ("weather", "temperature", "forecast" + one or more city names):
     call the ``get_weather`` tool for each city that has no result yet, then
     ``show_component_WeatherCard`` with the numbers the tool returned, then a
     one-line summary. Several cities use parallel tool calls (and several cards
     stream at once) unless ``parallel_tool_calls=False``, in which case they go
     one per reply.
   * *dashboard* ("dashboard"): ``show_component_Dashboard`` with a nested
     layout (groups of blocks, a chart series, a table, strings with quotes,
     newlines and non-ASCII text), then a summary.
   * *weather overview* ("dashboard" or "overview" + demo city names, only when
     the ``render_ui`` tool is offered and allows ``WeatherCard``): one
     ``render_ui`` call whose tree is a ``Stack`` (when allowed; else a list at
     the root) holding a heading text and a ``WeatherCard`` per city bound to
     ``weather.current`` (each card's ``key`` written after its props), then a
     one-line answer. Without ``render_ui`` the same words fall through to the
     scenarios above.
   * *table booking* ("book", "table", "reservation", only when the ``render_a2ui`` tool is
     offered: ``demo --a2ui``): two ``render_a2ui`` calls in one reply, the booking form and
     tonight's availability dashboard (A2UI v0.9 basic catalog, :mod:`agui_engine.demo.booking`),
     then a line saying what to do; once the form's ``book_table`` action comes back (a
     ``log_a2ui_event`` call and its result, the middleware's convention) a confirmation surface
     from the action's context, then a one-line answer. Without ``render_a2ui`` the words get a
     chat answer that says how to see it.
   * *named tool* (the message names an offered tool no other scenario drives, ``roll_dice`` or
     "roll dice": an MCP server's tool): call it once (numbers in the message fill its number
     properties), then say what it returned.
   * *chat*: anything else gets a plain text answer.

   Arguments follow the offered tool's schema: standard parameters
   (``_tambo_*``) first when the schema has them, properties in schema order,
   and -- for a ``strict`` tool -- an explicit ``null`` for every optional
   property the scenario leaves out, exactly as a structured-output model does.
   ``tool_choice`` is honoured (``none``: text only; a tool name: that tool,
   with arguments made up from its schema when no scenario covers it;
   ``required``: at least one call).

2. **Stream** (:meth:`EmbeddedModel.complete`): cut every text into chunks of 1
   to :data:`MAX_CHUNK_CHARS` characters, as a tokenizer would, with a
   pseudo-random generator seeded from the text itself (so the same reply always
   splits the same way, and splits land inside escapes, numbers and multi-byte
   characters). Parallel tool calls interleave their argument deltas. Usage and a
   finish reason close every reply. The model never waits: pacing for a human
   watching is the command line's (``agui_engine.cli.pacing``), so the core
   reads no clock.

The weather numbers come from :data:`DEMO_WEATHER`, a small fixed table: this is
a demo model and a demo tool, and says so in every answer it gives.

Raises: nothing on purpose; a conversation it cannot understand gets a chat
answer. Cancelling the consumer (``aclose()``) stops the generator at once.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import msgspec

from ..genui.a2ui import A2UI_LOG_EVENT_TOOL, A2UI_TOOL, A2UI_V1_VERSION, BASIC_CATALOG_V1_ID
from ..genui.resources import Resource, ResourceParamsError
from ..llm import (
    Finish,
    LLMStreamItem,
    LLMTool,
    ReasoningDelta,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolChoice,
    Usage,
)
from ..protocol.capabilities import ReasoningCapabilities
from .booking import (
    BOOKING_ACTION,
    BOOKING_SURFACE,
    CONFIRMATION_SURFACE,
    DEMO_RESTAURANT,
    availability_dashboard,
    booking_confirmation,
    booking_form,
    for_a2ui_version,
    is_booking_request,
    party_size,
)

__all__ = [
    "DASHBOARD_SCHEMA",
    "DEMO_WEATHER",
    "EMBEDDED_MODEL_NAME",
    "EmbeddedModel",
    "GET_WEATHER_TOOL",
    "MAX_CHUNK_CHARS",
    "PlannedCall",
    "PlannedReply",
    "WEATHER_CARD_RESOURCE_SCHEMA",
    "WEATHER_CARD_SCHEMA",
    "WEATHER_CURRENT",
    "WEATHER_PARAMS_SCHEMA",
    "chunk_text",
    "demo_weather",
    "message_field",
    "message_role",
    "message_text",
    "plan_reply",
    "weather_current",
]

#: Largest chunk the model emits. Real tokenizers produce tokens of 1-8
#: characters for English text and JSON punctuation (a 4-character average), so
#: chunks this size exercise the same splits a provider stream does.
MAX_CHUNK_CHARS = 8

#: Reported in :class:`~agui_engine.llm.Usage` so runs say which model answered.
EMBEDDED_MODEL_NAME = "embedded-demo-1"
_EMBEDDED_PROVIDER = "embedded"

#: Characters per token used for the usage estimate (the usual rule of thumb
#: for English text with BPE tokenizers).
_CHARS_PER_TOKEN = 4

_UI_PREFIX = "show_component_"  # mirrors components.UI_TOOL_PREFIX; the model only reads tool names
_RENDER_UI = "render_ui"  # mirrors uispec.UI_SPEC_TOOL
_OVERVIEW_WORDS = ("dashboard", "overview")
_STATUS_KEY = "_tambo_statusMessage"
_COMPLETION_KEY = "_tambo_completionStatusMessage"

# --------------------------------------------------------------------------- demo world

#: Props of the demo ``WeatherCard`` component.
WEATHER_CARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name to display, e.g. Tokyo"},
        "temperature": {"type": "number", "description": "Temperature in degrees Celsius"},
        "condition": {"type": "string", "description": "Weather condition, e.g. Partly cloudy"},
        "humidity": {"type": "number", "description": "Relative humidity in percent"},
        "wind_kph": {"type": "number", "description": "Wind speed in km/h"},
        "note": {"type": "string", "description": "A short remark shown under the numbers"},
    },
    "required": ["city", "temperature", "condition"],
}

_BLOCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["metric", "chart", "table", "note"]},
        "title": {"type": "string"},
        "value": {"type": "number"},
        "unit": {"type": "string"},
        "change": {"type": "number", "description": "Relative change, 0.1 = +10%"},
        "series": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"label": {"type": "string"}, "value": {"type": "number"}},
                "required": ["label", "value"],
            },
        },
        "columns": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        "text": {"type": "string"},
    },
    "required": ["kind", "title"],
}

#: Props of the demo ``Dashboard`` component: sections of blocks, nested.
DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "subtitle": {"type": "string"},
        "columns": {"type": "integer", "description": "Grid columns for the sections"},
        "sections": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "heading": {"type": "string"},
                    "blocks": {"type": "array", "items": _BLOCK_SCHEMA},
                },
                "required": ["heading", "blocks"],
            },
        },
    },
    "required": ["title", "columns", "sections"],
}

#: The demo ``get_weather`` tool as the model sees it (before standard parameters).
GET_WEATHER_TOOL = LLMTool(
    name="get_weather",
    description="Look up the current weather for a city (demo data).",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name, e.g. Tokyo"}},
        "required": ["city"],
    },
)

#: Demo weather data: fixed, illustrative numbers (not a forecast).
DEMO_WEATHER: dict[str, dict[str, Any]] = {
    "tokyo": {"city": "Tokyo", "temperature": 18.5, "condition": "Partly cloudy", "humidity": 64, "wind_kph": 12.6},
    "paris": {"city": "Paris", "temperature": 11.2, "condition": "Light rain", "humidity": 81, "wind_kph": 19.1},
    "london": {"city": "London", "temperature": 9.8, "condition": "Overcast", "humidity": 77, "wind_kph": 22.4},
    "new york": {"city": "New York", "temperature": 7.3, "condition": "Clear", "humidity": 48, "wind_kph": 15.0},
    "san francisco": {"city": "San Francisco", "temperature": 14.9, "condition": "Fog", "humidity": 88, "wind_kph": 9.7},
    "berlin": {"city": "Berlin", "temperature": 6.4, "condition": "Cloudy", "humidity": 70, "wind_kph": 14.2},
    "sydney": {"city": "Sydney", "temperature": 24.1, "condition": "Sunny", "humidity": 55, "wind_kph": 18.3},
    "beijing": {"city": "Beijing", "temperature": 4.0, "condition": "Haze", "humidity": 35, "wind_kph": 8.1},
    "são paulo": {"city": "São Paulo", "temperature": 26.7, "condition": "Thunderstorms", "humidity": 83, "wind_kph": 11.0},
    "reykjavík": {"city": "Reykjavík", "temperature": -1.5, "condition": "Snow showers", "humidity": 79, "wind_kph": 31.8},
    "cairo": {"city": "Cairo", "temperature": 23.6, "condition": "Sunny", "humidity": 30, "wind_kph": 10.4},
    "mumbai": {"city": "Mumbai", "temperature": 29.2, "condition": "Humid", "humidity": 74, "wind_kph": 13.5},
}


def demo_weather(city: str) -> dict[str, Any]:
    """The demo ``get_weather`` tool: current weather for ``city`` from :data:`DEMO_WEATHER`.

    Raises :class:`LookupError` for a city the demo table does not have. A plain
    exception, not an :class:`~agui_engine.protocol.errors.AguiEngineError`, on purpose: it is
    a tool's own failure, not the engine's. :class:`~agui_engine.loops.llm_agent.LLMAgent`
    turns any exception a server tool raises into a tool result carrying the error
    (``Error: LookupError: no demo weather data for ...``) and the run goes on, so the
    model can tell the user which cities it knows.
    """
    found = DEMO_WEATHER.get(city.strip().lower())
    if found is None:
        known = ", ".join(sorted(v["city"] for v in DEMO_WEATHER.values()))
        raise LookupError(f"no demo weather data for {city!r}; known cities: {known}")
    return dict(found)


#: Id of the demo's data resource: the current weather of a city (params ``{city}``).
_WEATHER_RESOURCE_ID = "weather.current"

#: Params of ``weather.current``.
WEATHER_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name, e.g. Tokyo"}},
    "required": ["city"],
    "additionalProperties": False,
}

#: Props of the demo ``WeatherCard`` when it is bound to ``weather.current``: besides
#: ``resourceId`` and ``params`` (added by ``Component(resources=...)``), a remark.
WEATHER_CARD_RESOURCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"note": {"type": "string", "description": "A short remark shown under the numbers"}},
}

#: Seconds a ``weather.current`` answer stays cached (the demo table never changes;
#: a real weather API updates every 10-15 minutes, so a minute is safe either way).
_WEATHER_CACHE_TTL = 60.0


def weather_current(params: Mapping[str, Any], identity: str | None) -> dict[str, Any]:
    """The resolver of ``weather.current``: :func:`demo_weather` for ``params["city"]``.

    Raises :class:`~agui_engine.genui.resources.ResourceParamsError` (422, path
    ``$.params.city``) for a city the demo table does not have, so a front end shows
    the caller's mistake rather than a server failure.
    """
    try:
        return demo_weather(str(params["city"]))
    except LookupError as exc:
        raise ResourceParamsError(str(exc), path="$.params.city") from None


#: The demo's ``weather.current`` resource (served by the gateway in front of the demo agent).
WEATHER_CURRENT = Resource(
    _WEATHER_RESOURCE_ID,
    weather_current,
    params=WEATHER_PARAMS_SCHEMA,
    description="the current weather of a city (demo data)",
    cache_ttl=_WEATHER_CACHE_TTL,
)


# --------------------------------------------------------------------------- conversation view


def message_field(obj: Any, *names: str) -> Any:
    """Field of a message Struct or dict, by snake_case or camelCase name."""
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return None


def message_role(message: Any) -> str | None:
    """A message's role: the ``role`` key of a dict, or the tag of an AG-UI message Struct."""
    if isinstance(message, Mapping):
        return message.get("role")
    config = getattr(type(message), "__struct_config__", None)
    tag = getattr(config, "tag", None)
    return tag if isinstance(tag, str) else getattr(message, "role", None)


def message_text(content: Any) -> str:
    """A message's content as text: a string as is, the ``text`` of each part of a list, joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        text = message_field(part, "text")
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(parts)


class _Turn(msgspec.Struct, kw_only=True):
    user_text: str = ""
    # tool call id -> (tool name, parsed arguments)
    calls: dict[str, tuple[str, Any]] = msgspec.field(default_factory=dict)
    # tool call id -> (content text, error or None)
    results: dict[str, tuple[str, str | None]] = msgspec.field(default_factory=dict)
    step: int = 0  # assistant messages since the user spoke
    a2ui_version: str = "v0.9"  # "v1.0" when the run's A2UI catalog (in the system prompt) is v1.0's

    def results_for(self, tool: str) -> list[tuple[Any, str, str | None]]:
        out = []
        for call_id, (name, args) in self.calls.items():
            if name == tool and call_id in self.results:
                content, error = self.results[call_id]
                out.append((args, content, error))
        return out

    def called(self, tool: str) -> list[Any]:
        return [args for name, args in self.calls.values() if name == tool]


def _read_turn(messages: Sequence[Any]) -> _Turn:
    last_user = -1
    for i, m in enumerate(messages):
        if message_role(m) == "user":
            last_user = i
    turn = _Turn()
    if last_user < 0:
        return turn
    turn.user_text = message_text(message_field(messages[last_user], "content"))
    if any(message_role(m) == "system" and BASIC_CATALOG_V1_ID in message_text(message_field(m, "content"))
           for m in messages):
        turn.a2ui_version = A2UI_V1_VERSION  # the catalog the model is shown is the v1.0 basic one
    for m in messages[last_user + 1 :]:
        role = message_role(m)
        if role == "assistant":
            turn.step += 1
            for call in message_field(m, "tool_calls", "toolCalls") or ():
                function = message_field(call, "function")
                raw = message_field(function, "arguments") or ""
                try:
                    args = json.loads(raw) if raw else {}
                except ValueError:
                    args = None
                turn.calls[str(message_field(call, "id"))] = (str(message_field(function, "name")), args)
        elif role == "tool":
            turn.results[str(message_field(m, "tool_call_id", "toolCallId"))] = (
                message_text(message_field(m, "content")),
                message_field(m, "error"),
            )
    return turn


# --------------------------------------------------------------------------- planning


class PlannedCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call of a planned reply; ``arguments`` is the complete JSON text."""

    name: str
    arguments: str


class PlannedReply(msgspec.Struct, frozen=True, kw_only=True):
    reasoning: str = ""
    text: str = ""
    calls: tuple[PlannedCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"


_CITY_RE = re.compile(
    r"\b(?:in|for|at|and|vs\.?|versus|or)\s+((?:[A-Z][\w'\u00c0-\u024f-]*)(?:\s+[A-Z][\w'\u00c0-\u024f-]*)*)"
)
_WEATHER_WORDS = ("weather", "temperature", "forecast", "raining", "sunny")


def _cities(text: str) -> list[str]:
    """City names: capitalised words after in/for/at/and/or/vs, else known demo cities in any case."""
    found: list[str] = []
    for match in _CITY_RE.finditer(text):
        # "Tokyo and Paris" is caught as "Tokyo" by one match and "Paris" by the next
        for name in re.split(r"\s+(?:and|or)\s+", match.group(1)):
            name = name.strip(" ?.!,")
            if name and name.lower() not in {c.lower() for c in found}:
                found.append(name)
    if not found:  # "weather in tokyo": a lower-case name of a city the demo knows
        lowered = text.lower()
        hits = [(lowered.find(key), entry["city"]) for key, entry in DEMO_WEATHER.items() if key in lowered]
        found = [city for _, city in sorted(hits)]
    return found


def _tools_by_name(tools: Sequence[LLMTool]) -> dict[str, LLMTool]:
    return {t.name: t for t in tools}


def _schema_properties(tool: LLMTool) -> dict[str, Any] | None:
    props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return props if isinstance(props, dict) else None


def _arguments(tool: LLMTool, values: dict[str, Any], status: tuple[str, str] | None) -> str:
    """The JSON text a well-behaved model sends for ``tool`` with these values.

    Schema order; standard parameters first when offered; ``null`` for omitted
    properties of a strict tool (strict mode makes every property required).
    """
    props = _schema_properties(tool)
    out: dict[str, Any] = {}
    if props is None:
        out.update(values)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))
    if status is not None:
        if _STATUS_KEY in props:
            out[_STATUS_KEY] = status[0]
        if _COMPLETION_KEY in props:
            out[_COMPLETION_KEY] = status[1]
    for key in props:
        if key in out:
            continue
        if key in values:
            out[key] = values[key]
        elif key in (_STATUS_KEY, _COMPLETION_KEY):
            out[key] = ""
        elif tool.strict:
            out[key] = None
    # ensure_ascii=False for names, but escapes still appear for quotes, newlines
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _example(schema: Any, depth: int = 0) -> Any:
    """A plausible value for ``schema`` (used when a tool is forced and no scenario fits)."""
    if not isinstance(schema, dict) or depth > 6:
        return "example"
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        options = [s for s in schema.get(key, ()) if not (isinstance(s, dict) and s.get("type") == "null")]
        if options:
            return _example(options[0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        required = schema.get("required", list(props))
        return {k: _example(v, depth + 1) for k, v in props.items() if k in required}
    if kind == "array":
        return [_example(schema.get("items", {}), depth + 1)]
    return {"integer": 1, "number": 1.5, "boolean": True, "null": None}.get(str(kind), "example")


def _card_city(args: dict[str, Any]) -> str:
    """The city a WeatherCard call showed: its ``city`` prop, or ``params.city`` when resource-bound."""
    params = args.get("params")
    city = params.get("city") if isinstance(params, dict) else args.get("city")
    return str(city or "")


def _resource_ids(tool: LLMTool) -> list[str]:
    """The ids a resource-bound component tool offers (its ``resourceId`` enum), else []."""
    props = _schema_properties(tool) or {}
    spec = props.get("resourceId")
    ids = spec.get("enum") if isinstance(spec, dict) else None
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _weather_plan(turn: _Turn, tools: dict[str, LLMTool], cities: list[str], parallel: bool) -> PlannedReply:
    get_weather = tools.get("get_weather")
    card = tools.get(_UI_PREFIX + "WeatherCard")
    results: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
    for args, content, error in turn.results_for("get_weather"):
        if not isinstance(args, dict):
            continue
        city = str(args.get("city", "")).lower()
        data = None
        if error is None:
            try:
                parsed = json.loads(content)
                data = parsed if isinstance(parsed, dict) else None
            except ValueError:
                data = None
            if data is None:
                error = content or "the tool returned no data"
        results[city] = (data, error)

    missing = [c for c in cities if c.lower() not in results]
    if get_weather is not None and missing:
        batch = missing if parallel else missing[:1]
        calls = tuple(
            PlannedCall(
                name="get_weather",
                arguments=_arguments(
                    get_weather,
                    {"city": c},
                    (f"Checking the weather in {c}", f"Checked the weather in {c}"),
                ),
            )
            for c in batch
        )
        first = turn.step == 0
        return PlannedReply(
            reasoning=(
                f"The user wants the current weather for {_join(cities)}. I have a get_weather tool, "
                "so I should look the numbers up before showing anything."
                if first
                else ""
            ),
            text=f"Let me check the weather in {_join(batch)}." if first else "",
            calls=calls,
        )

    shown = {_card_city(a).lower() for a in turn.called(_UI_PREFIX + "WeatherCard") if isinstance(a, dict)}
    resource_ids = _resource_ids(card) if card is not None else []
    # a card bound to a resource needs no numbers from the model (the app fetches them),
    # so without a get_weather tool it is shown for every city straight away
    bound = bool(resource_ids) and get_weather is None
    rid = _WEATHER_RESOURCE_ID if _WEATHER_RESOURCE_ID in resource_ids or not resource_ids else resource_ids[0]
    found = {c: results.get(c.lower(), (None, None))[0] for c in cities}
    ready = [c for c in cities if bound or found[c] is not None]
    to_show = [c for c in ready if str((found[c] or {}).get("city", c)).lower() not in shown]
    if card is not None and to_show:
        batch = to_show if parallel else to_show[:1]
        card_calls: list[PlannedCall] = []
        for c in batch:
            data = dict(found[c] or {})
            data["note"] = "Demo data from the embedded model, not a live forecast."
            if resource_ids:
                # a resource-bound card: the model names the data, the app fetches it
                data = {
                    "resourceId": rid,
                    "params": {"city": data.get("city", c)},
                    "note": f"Live from the {rid} resource (demo data), not a forecast.",
                }
            card_calls.append(
                PlannedCall(
                    name=card.name,
                    arguments=_arguments(
                        card,
                        data,
                        (f"Showing the weather card for {data.get('city', c)}", f"Showed the weather card for {data.get('city', c)}"),
                    ),
                )
            )
        return PlannedReply(calls=tuple(card_calls))

    lines = []
    for c in cities:
        data, error = results.get(c.lower(), (None, None))
        if data is not None:
            lines.append(_weather_sentence(data, c))
        elif error is not None:
            lines.append(f"I couldn't get the weather for {c}: {error.rstrip('.')}.")
        elif bound and c.lower() in shown:
            lines.append(f"The card shows the current weather in {c}; the app loads it from {rid}.")
        else:
            lines.append(f"I have no way to look up the weather for {c} here.")
    return PlannedReply(text=" ".join(lines) + " (Demo data from the embedded model.)")


def _weather_sentence(data: dict[str, Any], city: str) -> str:
    """One sentence of a weather tool result, saying only what the result has: a
    client's tool may answer ``{"city": ..., "temperature": 21.0}`` and nothing else."""
    where = data.get("city") if isinstance(data.get("city"), str) else city
    said = []
    temperature, condition, humidity = data.get("temperature"), data.get("condition"), data.get("humidity")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        said.append(f"{temperature}°C")
    if isinstance(condition, str) and condition:
        said.append(condition.lower())
    sentence = f"It's {' and '.join(said)} in {where}" if said else f"Here is the weather in {where}"
    if isinstance(humidity, (int, float)) and not isinstance(humidity, bool):
        sentence += f", with {humidity}% humidity"
    return sentence + "."


_DASHBOARD_PROPS: dict[str, Any] = {
    "title": "Q3 business overview",
    "subtitle": None,  # left out: an optional prop a strict model sends as null
    "columns": 2,
    "sections": [
        {
            "heading": "Revenue",
            "blocks": [
                {"kind": "metric", "title": "Net revenue", "value": 1284500.75, "unit": "USD", "change": 0.125},
                {"kind": "metric", "title": "Gross margin", "value": 61.4, "unit": "%", "change": -0.018},
                {
                    "kind": "chart",
                    "title": "Weekly signups",
                    "series": [
                        {"label": "W1", "value": 1203},
                        {"label": "W2", "value": 1388},
                        {"label": "W3", "value": 1291},
                        {"label": "W4", "value": 1502.5},
                    ],
                },
            ],
        },
        {
            "heading": "Customers",
            "blocks": [
                {"kind": "metric", "title": "Active users", "value": 48213, "change": 3.1e-2},
                {
                    "kind": "table",
                    "title": "Top regions",
                    "columns": ["Region", "Share"],
                    "rows": [["EMEA", "41%"], ["Americas", "38%"], ["APAC — Japan & Korea", "21%"]],
                },
                {
                    "kind": "note",
                    "title": "Caveats",
                    "text": 'Figures are "preliminary":\n- Q3 close is pending\n- FX at 1 € = 1.08 $\tsource: finance\\ops',
                },
            ],
        },
    ],
}


def _dashboard_plan(turn: _Turn, tools: dict[str, LLMTool]) -> PlannedReply:
    dashboard = tools.get(_UI_PREFIX + "Dashboard")
    if dashboard is not None and not turn.called(dashboard.name):
        values = {k: v for k, v in _DASHBOARD_PROPS.items() if v is not None}
        return PlannedReply(
            reasoning="A dashboard request: lay the numbers out in two sections, revenue and customers.",
            text="Here is the Q3 overview as a dashboard.",
            calls=(
                PlannedCall(
                    name=dashboard.name,
                    arguments=_arguments(
                        dashboard, values, ("Building the Q3 dashboard", "Built the Q3 dashboard")
                    ),
                ),
            ),
        )
    if dashboard is None:
        return PlannedReply(text="I would show a dashboard, but no Dashboard component is available in this app.")
    return PlannedReply(
        text="Net revenue is up 12.5% while gross margin dipped slightly; active users grew 3.1%. "
        "(Demo data from the embedded model.)"
    )


def _allowed_components(tool: LLMTool) -> list[str]:
    """The component names a ``render_ui`` tool allows (its ``component`` enum), else []."""
    found: list[str] = []

    def walk(schema: Any) -> None:
        if isinstance(schema, dict):
            component = schema.get("properties", {}).get("component") if isinstance(
                schema.get("properties"), dict) else None
            if isinstance(component, dict) and isinstance(component.get("enum"), list):
                found.extend(n for n in component["enum"] if isinstance(n, str) and n not in found)
            for value in schema.values():
                walk(value)
        elif isinstance(schema, list):
            for value in schema:
                walk(value)

    walk(tool.parameters)
    return found


def _overview_plan(turn: _Turn, tool: LLMTool, cities: list[str]) -> PlannedReply:
    """A ``render_ui`` tree of weather cards for ``cities``, then a one-line answer."""
    if turn.called(_RENDER_UI):
        return PlannedReply(
            text=f"The overview shows the current weather in {_join(cities)}; each card loads its numbers from "
            f"{_WEATHER_RESOURCE_ID}. (Demo data from the embedded model.)"
        )
    cards: list[Any] = [
        # key after props: a node's identity is fixed when it opens, whatever comes later
        {"component": "WeatherCard",
         "props": {"resourceId": _WEATHER_RESOURCE_ID, "params": {"city": city}},
         "key": city.lower().replace(" ", "-")}
        for city in cities
    ]
    heading = f"Weather overview: {_join(cities)} (demo data)"
    if "Stack" in _allowed_components(tool):
        root: Any = {"component": "Stack", "key": "weather-overview", "props": {"direction": "row", "gap": 12},
                     "children": [heading, *cards]}
    else:
        root = [heading, *cards]
    return PlannedReply(
        reasoning=f"An overview of {_join(cities)}: one render_ui tree, a card per city bound to {_WEATHER_RESOURCE_ID}.",
        text=f"Here is a weather overview for {_join(cities)}.",
        calls=(PlannedCall(name=tool.name, arguments=_arguments(
            tool, {"root": root}, ("Laying out the weather overview", "Laid out the weather overview"))),),
    )


def _booking_plan(turn: _Turn, tool: LLMTool) -> PlannedReply:
    """The table booking in A2UI: the form and the dashboard, then the confirmation of the action."""
    rendered = {args.get("surfaceId") for args in turn.called(tool.name) if isinstance(args, dict)}
    actions = [args for args in turn.called(A2UI_LOG_EVENT_TOOL)
               if isinstance(args, dict) and args.get("name") == BOOKING_ACTION]
    if actions:
        context = actions[-1].get("context")
        context = context if isinstance(context, dict) else {}
        if CONFIRMATION_SURFACE not in rendered:
            return PlannedReply(
                reasoning="The user pressed Book the table: confirm what the form's context says.",
                text="Booking it.",
                calls=(PlannedCall(name=tool.name, arguments=_arguments(
                    tool, for_a2ui_version(booking_confirmation(context), turn.a2ui_version), None)),),
            )
        booked = str(context.get("guests") or "?")
        return PlannedReply(text=f"Done: a table for {booked} at {DEMO_RESTAURANT['name']}, "
                                 "shown above. (Demo: nothing was reserved.)")
    if BOOKING_SURFACE not in rendered:
        guests = party_size(turn.user_text)
        return PlannedReply(
            reasoning=f"A table for {guests}: a booking form bound to /booking, and tonight's availability.",
            text=f"Here is a booking form for {guests} at {DEMO_RESTAURANT['name']}, and tonight's availability.",
            calls=tuple(PlannedCall(name=tool.name,
                                    arguments=_arguments(tool, for_a2ui_version(surface, turn.a2ui_version), None))
                        for surface in (booking_form(guests), availability_dashboard())),
        )
    return PlannedReply(text="Fill in your name, check the time and press “Book the table”. (Demo data.)")


def _chat_plan(turn: _Turn, tools: dict[str, LLMTool]) -> PlannedReply:
    text = turn.user_text.strip()
    if not text:
        return PlannedReply(text="Hello! Ask me about the weather in a city, or for a dashboard.")
    components = sorted(n[len(_UI_PREFIX) :] for n in tools if n.startswith(_UI_PREFIX))
    offer = f" I can show these components: {', '.join(components)}." if components else ""
    if is_booking_request(text):
        return PlannedReply(text="I would show a booking form, but no render_a2ui tool is offered here "
                                 "(try: agui-engine demo --a2ui \"book a table for two\").")
    if re.search(r"\b(hi|hello|hey)\b", text, re.IGNORECASE):
        return PlannedReply(text=f"Hello! I'm the embedded demo model.{offer} Try asking about the weather in Tokyo.")
    return PlannedReply(
        text=f"You said: “{text}”. I'm the embedded demo model, so I only know a few scenarios: "
        f"the weather in a city (try Tokyo and Paris) and a business dashboard.{offer}"
    )


def _named_tool(text: str, tools: dict[str, LLMTool]) -> LLMTool | None:
    """The first offered tool the message names (``roll_dice`` or "roll dice", any case), of those
    no other scenario drives (components, ``render_ui``, ``get_weather``)."""
    lowered = text.lower()
    best: tuple[int, LLMTool] | None = None
    for name, tool in tools.items():
        if name.startswith(_UI_PREFIX) or name in (_RENDER_UI, "get_weather"):
            continue
        for spelling in {name.lower(), name.lower().replace("_", " ")}:
            match = re.search(rf"(?<![\w]){re.escape(spelling)}(?![\w])", lowered)
            if match and (best is None or match.start() < best[0]):
                best = (match.start(), tool)
    return best[1] if best else None


def _kinds(schema: Any) -> set[str]:
    """The JSON types a schema allows: its ``type`` (or list of types) and its ``anyOf`` / ``oneOf``
    options' (a strict schema makes an optional property ``anyOf: [{type: null}, {...}]``)."""
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    out = {k for k in (kind if isinstance(kind, list) else [kind]) if isinstance(k, str)}
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            out |= _kinds(option)
    return out


def _named_tool_plan(turn: _Turn, tool: LLMTool) -> PlannedReply:
    """*Named tool*: call the tool the user named (numbers in the message fill its number
    properties, in order; the rest made up from its schema), then say what it returned."""
    done = turn.results_for(tool.name)
    if done:
        _, content, error = done[-1]
        return PlannedReply(text=f"{tool.name} failed: {error}" if error else f"{tool.name} says: {content}")
    if turn.called(tool.name):
        return PlannedReply(text=f"{tool.name} gave no result.")
    value = _example(tool.parameters)
    values = value if isinstance(value, dict) else {}
    numbers = iter(re.findall(r"-?\d+", turn.user_text))
    for key, schema in (_schema_properties(tool) or {}).items():
        if _kinds(schema) & {"integer", "number"}:
            number = next(numbers, None)
            if number is not None:
                values[key] = int(number)
    status = (f"Calling {tool.name}", f"Called {tool.name}")
    return PlannedReply(text=f"Calling {tool.name}.",
                        calls=(PlannedCall(name=tool.name, arguments=_arguments(tool, values, status)),))


def _forced(choice: str, plan: PlannedReply, tools: dict[str, LLMTool]) -> PlannedReply:
    if choice == "auto":
        return plan
    if choice == "none":
        if not plan.calls:
            return plan
        return PlannedReply(text=plan.text or "I would use a tool for this, but tools are turned off for this reply.")
    if choice == "required":
        if plan.calls or not tools:
            return plan
        tool = next(iter(tools.values()))
        return PlannedReply(text=plan.text, calls=(PlannedCall(name=tool.name, arguments=_made_up(tool)),))
    chosen = tools.get(choice)
    if chosen is None:  # the decision loop refuses unknown names before calling a model
        return plan
    mine = tuple(c for c in plan.calls if c.name == choice)
    if mine:
        return PlannedReply(reasoning=plan.reasoning, text=plan.text, calls=mine)
    return PlannedReply(text=plan.text, calls=(PlannedCall(name=chosen.name, arguments=_made_up(chosen)),))


def _made_up(tool: LLMTool) -> str:
    value = _example(tool.parameters)
    values = value if isinstance(value, dict) else {}
    return _arguments(tool, values, (f"Calling {tool.name}", f"Called {tool.name}"))


def plan_reply(
    messages: Sequence[Any],
    tools: Sequence[LLMTool],
    tool_choice: ToolChoice = "auto",
    *,
    parallel_tool_calls: bool = True,
) -> PlannedReply:
    """Decide the whole reply for this conversation (pure and deterministic)."""
    turn = _read_turn(messages)
    by_name = _tools_by_name(tools)
    lowered = turn.user_text.lower()
    render_ui = by_name.get(_RENDER_UI)
    render_a2ui = by_name.get(A2UI_TOOL)
    known = [c for c in _cities(turn.user_text) if c.lower() in DEMO_WEATHER]
    named = _named_tool(turn.user_text, by_name)
    if render_a2ui is not None and is_booking_request(turn.user_text):
        plan = _booking_plan(turn, render_a2ui)
    elif named is not None:
        plan = _named_tool_plan(turn, named)
    elif (render_ui is not None and known and any(word in lowered for word in _OVERVIEW_WORDS)
            and "WeatherCard" in _allowed_components(render_ui)):
        plan = _overview_plan(turn, render_ui, known)
    elif any(word in lowered for word in _WEATHER_WORDS):
        cities = _cities(turn.user_text)
        plan = (
            _weather_plan(turn, by_name, cities, parallel_tool_calls)
            if cities
            else PlannedReply(text="Which city would you like the weather for?")
        )
    elif "dashboard" in lowered:
        plan = _dashboard_plan(turn, by_name)
    else:
        plan = _chat_plan(turn, by_name)
    return _forced(tool_choice, plan, by_name)


# --------------------------------------------------------------------------- streaming


def chunk_text(text: str, *, seed: str = "") -> list[str]:
    """Cut ``text`` into pieces of 1..:data:`MAX_CHUNK_CHARS` characters, deterministically."""
    rng = random.Random(f"{seed}\x00{text}")
    out = []
    i = 0
    while i < len(text):
        size = rng.randint(1, MAX_CHUNK_CHARS)
        out.append(text[i : i + size])
        i += size
    return out


def _count_tokens(chars: int) -> int:
    return (chars + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN


class EmbeddedModel:
    """The deterministic demo model (see the module docstring).

    ``reasoning`` switches the reasoning preamble on the first step of a tool scenario;
    ``seed`` changes how replies are cut into chunks.
    """

    def __init__(self, *, reasoning: bool = True, seed: str = "") -> None:
        self.reasoning = reasoning
        self.seed = seed

    def reasoning_capabilities(self) -> ReasoningCapabilities:
        """With ``reasoning``: a streamed preamble, sealed with a signature (an encrypted
        value), as Anthropic thinking is. Without: no reasoning."""
        if self.reasoning:
            return ReasoningCapabilities(supported=True, streaming=True, encrypted=True)
        return ReasoningCapabilities(supported=False)

    def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[LLMTool],
        tool_choice: ToolChoice = "auto",
        *,
        parallel_tool_calls: bool = True,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[LLMStreamItem]:
        plan = plan_reply(messages, tools, tool_choice, parallel_tool_calls=parallel_tool_calls)
        input_chars = sum(len(message_text(message_field(m, "content"))) for m in messages) + sum(
            len(json.dumps(t.parameters)) + len(t.description) for t in tools
        )
        budget = None if max_output_tokens is None else max_output_tokens * _CHARS_PER_TOKEN
        return self._stream(plan, _count_tokens(input_chars), _conversation_key(messages), budget)

    async def _stream(
        self, plan: PlannedReply, input_tokens: int, key: str, budget: int | None
    ) -> AsyncIterator[LLMStreamItem]:
        out_chars = 0
        truncated = False

        def spend(piece: str) -> bool:
            """Count ``piece`` against ``max_output_tokens``; False once the budget is gone."""
            nonlocal out_chars, truncated
            if budget is not None and out_chars + len(piece) > budget:
                truncated = True
                return False
            out_chars += len(piece)
            return True

        if self.reasoning and plan.reasoning:
            for piece in chunk_text(plan.reasoning, seed=self.seed):
                if not spend(piece):
                    break
                yield ReasoningDelta(text=piece)
            else:
                # an opaque signature, as Anthropic sends at the end of a thinking block
                yield ReasoningDelta(signature=f"emb-sig-{zlib.crc32(plan.reasoning.encode()):010d}")
        if not truncated:
            for piece in chunk_text(plan.text, seed=self.seed):
                if not spend(piece):
                    break
                yield TextDelta(text=piece)
        calls = plan.calls if not truncated else ()
        pieces = [chunk_text(c.arguments, seed=self.seed + c.name) for c in calls]
        for index, call in enumerate(calls):
            # unique per conversation position and call, stable across runs
            yield ToolCallStart(index=index, id=f"call_{key}_{index}", name=call.name)
        # parallel calls interleave their deltas, one chunk of each in turn
        position = [0] * len(calls)
        remaining = sum(len(p) for p in pieces)
        while remaining and not truncated:
            for index, chunks in enumerate(pieces):
                if position[index] < len(chunks):
                    piece = chunks[position[index]]
                    position[index] += 1
                    remaining -= 1
                    if not spend(piece):
                        break
                    yield ToolCallArgsDelta(index=index, delta=piece)
            # the LLMClient contract: every started call ends, even a truncated one
        for index in range(len(calls)):
            yield ToolCallEnd(index=index)
        output_tokens = _count_tokens(out_chars)
        yield Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
            provider=_EMBEDDED_PROVIDER,
            model=EMBEDDED_MODEL_NAME,
        )
        if truncated:
            yield Finish(reason="length", raw_reason="max_output_tokens")
        else:
            yield Finish(reason="tool_calls" if calls else "stop", raw_reason=plan.finish_reason)


def _conversation_key(messages: Sequence[Any]) -> str:
    """A short digest of the conversation so far, so tool call ids differ at every step."""
    digest = 0
    for m in messages:
        part = f"{message_field(m, 'id')}|{message_role(m)}|{message_text(message_field(m, 'content'))}"
        digest = zlib.crc32(part.encode("utf-8", "surrogatepass"), digest)
    return f"{len(messages):03d}{digest:08x}"
