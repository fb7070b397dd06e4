"""Tool sources: tools that live somewhere else (an MCP server), offered to the model by name.

Theory of operation
-------------------
A :class:`ToolSource` is anything that can list tools and call one of them: the MCP
adapter's ``agui_engine.adapters.MCPServer`` is the one the engine ships (the IO -- a
connection, a subprocess -- lives there; this module is the pure part: naming, the
tool a model sees, a result turned into the text of a tool result).

``LLMAgent(..., mcp_servers=[...])`` and ``AgentLoop(..., mcp_servers=[...])`` take
tool sources. Per run, each source's tools (listed by the source once per session and
again after it says they changed; the source caches them) are named by
:func:`name_source_tools` and become :class:`~agui_engine.genui.components.ServerTool`
values whose call goes to the source (:func:`source_server_tools`): the decision loop
runs them like any ``async def`` server tool. A source that cannot be reached lists no
tools (it says so in its :meth:`ToolSource.status` and its log); the run goes on.

Naming (the documented rule, ``spec/mcp.md`` §3)
-------------------------------------------------
A source tool keeps its own name when that name is a valid provider tool name
(``[A-Za-z0-9_-]{1,64}``) and no other tool of the run has it -- not a component's
``show_component_*`` tool, not a server or client tool, not another source's tool.
Otherwise every tool of that name (on every source that has it) becomes
``<sourceId>__<name>`` (characters outside ``[A-Za-z0-9_-]`` replaced by ``_``); when
that is still taken or too long, it is cut and ends with ``_<8 hex digits>`` of a
stable hash of ``sourceId/name``. The run's own tools (components, server and client
tools) never change name: the source tools give way. The rule depends only on the set
of names, never on the order of the sources.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from ..genui.components import MAX_TOOL_NAME_LENGTH, ServerTool, tool_from_schema
from ..genui.mcp_apps import AppServer, AppSource, AppTool, AppToolResult, is_model_visible, ui_resource_uri
from ..protocol.errors import UpstreamError, UsageError

__all__ = [
    "SOURCE_NAME_SEPARATOR",
    "SourceTool",
    "SourceToolCache",
    "SourceToolError",
    "SourceToolResult",
    "ToolSource",
    "check_tool_sources",
    "name_source_tools",
    "result_text",
    "run_source_tools",
    "source_server_tools",
    "tool_source_status",
]

_log = logging.getLogger("agui_engine.loops.tool_sources")

#: Between a source's id and its tool's name in a namespaced tool name (``weather__forecast``).
SOURCE_NAME_SEPARATOR: Final = "__"

_VALID_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NOT_NAME_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")
#: Hex digits of the hash that ends a namespaced name that had to be cut or was still taken.
_HASH_DIGITS: Final = 8


class SourceTool(msgspec.Struct, frozen=True, kw_only=True):
    """One tool a source offers: its own ``name``, ``description``, ``input_schema``
    (a JSON Schema object) and ``meta`` (the source's ``_meta``, e.g. MCP Apps'
    ``{"ui": {"resourceUri": "ui://..."}}``, kept as it came)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "object", "properties": {}})
    meta: dict[str, Any] | None = None


class SourceToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one call returned: ``text`` (the tool result the model reads),
    ``is_error`` (the source said the tool failed: MCP's ``isError``) and ``raw``
    (the source's whole result as JSON-ready data, e.g. an MCP ``CallToolResult``)."""

    text: str
    is_error: bool = False
    raw: dict[str, Any] | None = None


class SourceToolError(UpstreamError):
    """A source tool reported failure (MCP ``isError: true``): its text is the message.

    Raised by the call of a :func:`source_server_tools` tool, so the agent turns it into
    an error tool result (``Error: ...``) and the run goes on."""

    default_code = "tool_error"


@runtime_checkable
class ToolSource(Protocol):
    """Where remote tools come from (see the module docstring)."""

    @property
    def source_id(self) -> str:
        """A short name, unique among a run's sources (``[A-Za-z0-9_-]``): the namespace."""
        ...

    async def list_tools(self) -> Sequence[SourceTool]:
        """The tools now offered (cached by the source); ``[]`` when it cannot be reached.
        Never raises for a remote failure (the source logs it and reports it in :meth:`status`)."""
        ...

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> SourceToolResult:
        """Call the tool ``name`` (the source's own name). Raises an
        :class:`~agui_engine.protocol.errors.AguiEngineError` when the call failed
        (unreachable, timed out, too large, malformed reply); a tool that ran and
        failed is a result with ``is_error`` set."""
        ...

    def status(self) -> dict[str, Any]:
        """JSON-ready health (``serverId``, ``connected``, ``tools``, ``error``) for ``/readyz``:
        no credential in it."""
        ...


def _sanitize(text: str) -> str:
    return _NOT_NAME_CHAR.sub("_", text) or "_"


def _hashed(source_id: str, name: str, base: str) -> str:
    digest = hashlib.sha256(f"{source_id}/{name}".encode()).hexdigest()[:_HASH_DIGITS]
    return f"{base[: MAX_TOOL_NAME_LENGTH - _HASH_DIGITS - 1]}_{digest}"


def name_source_tools(
    tools: Sequence[tuple[str, SourceTool]], taken: Sequence[str] | frozenset[str] | set[str]
) -> list[tuple[str, str, SourceTool]]:
    """``(model name, source id, tool)`` for each ``(source id, tool)`` by the naming rule
    (module docstring): ``taken`` are the run's own tool names, which never change. Pure;
    the result keeps the input's order (a tool a source lists twice: its first), its names
    are distinct, and each depends only on the set of names, not on their order."""
    unique: list[tuple[str, SourceTool]] = []
    seen_pairs: set[tuple[str, str]] = set()
    for source_id, tool in tools:
        if (source_id, tool.name) not in seen_pairs:
            seen_pairs.add((source_id, tool.name))
            unique.append((source_id, tool))
    reserved = set(taken)
    counts: dict[str, int] = {}
    for _, tool in unique:
        counts[tool.name] = counts.get(tool.name, 0) + 1
    # the names that stay: unique among the sources, free in the run, valid for a provider
    kept = {tool.name for _, tool in unique
            if counts[tool.name] == 1 and tool.name not in reserved and _VALID_NAME.match(tool.name)}
    # the others are namespaced; a namespaced name that two tools would share, or that is
    # taken or too long, is hashed for all of them (so no order decides who gets it)
    candidates = {(sid, tool.name): f"{_sanitize(sid)}{SOURCE_NAME_SEPARATOR}{_sanitize(tool.name)}"
                  for sid, tool in unique if tool.name not in kept}
    shared: dict[str, int] = {}
    for candidate in candidates.values():
        shared[candidate] = shared.get(candidate, 0) + 1
    out: list[tuple[str, str, SourceTool]] = []
    for source_id, tool in unique:
        if tool.name in kept:
            out.append((tool.name, source_id, tool))
            continue
        name = candidates[(source_id, tool.name)]
        if len(name) > MAX_TOOL_NAME_LENGTH or shared[name] > 1 or name in reserved or name in kept:
            name = _hashed(source_id, tool.name, name)
        out.append((name, source_id, tool))
    return out


def result_text(content: Sequence[Any] | None, structured: Any = None) -> str:
    """The text of a tool result from MCP ``content`` blocks (JSON-ready dicts): the
    ``text`` of its text blocks joined by newlines, as ``@ag-ui/mcp-apps-middleware``
    does; with none, the blocks as JSON (images, resources), else ``structured``
    (``structuredContent``) as JSON, else the empty string. Pure."""
    blocks = list(content or ())
    texts = [b["text"] for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"
             and isinstance(b.get("text"), str)]
    if texts:
        return "\n".join(texts)
    if blocks:
        return msgspec.json.encode(blocks, enc_hook=str).decode()
    if structured is not None:
        return msgspec.json.encode(structured, enc_hook=str).decode()
    return ""


def source_server_tools(
    named: Sequence[tuple[str, str, SourceTool]], sources: Mapping[str, ToolSource],
    *, on_result: Callable[[str, str, SourceTool, Mapping[str, Any], SourceToolResult], None] | None = None,
) -> list[ServerTool]:
    """One ``async def`` :class:`ServerTool` per ``(model name, source id, tool)`` of
    :func:`name_source_tools`: offered to the model under its model name with the
    tool's JSON Schema, calling ``sources[source id].call_tool(tool.name, arguments)``.
    Its result is the source's text; an ``is_error`` result raises
    :class:`SourceToolError` (an error tool result for the model). A tool with an MCP app
    (``_meta.ui.resourceUri``) of an :class:`~agui_engine.genui.mcp_apps.AppSource` returns an
    :class:`~agui_engine.genui.mcp_apps.AppToolResult` instead (the agent answers the model with
    its text and then shows the app); an app-only tool (``_meta.ui.visibility`` without
    ``"model"``) is not offered. ``on_result(model name,
    source id, tool, arguments, result)`` sees every result (the MCP Apps activity hooks in here)."""
    out: list[ServerTool] = []
    for model_name, source_id, tool in named:
        source = sources[source_id]

        mcp_tool = {"_meta": tool.meta}
        if not is_model_visible(mcp_tool):
            continue  # an app-only tool (MCP Apps visibility ["app"]): its app calls it, the model never
        uri = ui_resource_uri(mcp_tool)
        app_server = source.app_server if uri is not None and isinstance(source, AppSource) else None

        async def call(arguments: dict[str, Any], *, _source: ToolSource = source, _tool: SourceTool = tool,
                       _name: str = model_name, _sid: str = source_id, _uri: str | None = uri,
                       _app: AppServer | None = app_server) -> str | AppToolResult:
            result = await _source.call_tool(_tool.name, arguments)
            if on_result is not None:
                on_result(_name, _sid, _tool, arguments, result)
            if _app is not None and _uri is not None:
                # a tool with an app: the agent shows it after the result, isError or not (as the middleware)
                return AppToolResult(result=result.raw or {}, resource_uri=_uri, server=_app)
            if result.is_error:
                raise SourceToolError(result.text or f"the tool {_tool.name} of {_sid} failed")
            return result.text

        # as the middleware: the app's resource is named in the description (AG-UI tools carry no _meta)
        description = tool.description if app_server is None else f"{tool.description}\n[UI Resource: {uri}]"
        try:
            listed: dict[str, Any] = {"name": tool.name, "inputSchema": dict(tool.input_schema)}
            if tool.description:
                listed["description"] = tool.description
            app = (AppTool(resource_uri=uri, server=app_server, tool=listed)
                   if app_server is not None and uri is not None else None)
            out.append(tool_from_schema(model_name, description, tool.input_schema, call, app=app))
        except UsageError as exc:  # a schema no model accepts: that tool is left out, the others stay
            _log.warning("tool %s of %s left out: %s", tool.name, source_id, exc.message)
    return out


def check_tool_sources(sources: Sequence[ToolSource]) -> list[ToolSource]:
    """``sources`` as a list. Raises :class:`UsageError` for something that is not a
    :class:`ToolSource` or two sources with one ``source_id``."""
    if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence):
        raise UsageError("mcp_servers must be a list of tool sources (agui_engine.adapters.MCPServer)")
    out = list(sources)
    seen: set[str] = set()
    for i, source in enumerate(out):
        if not isinstance(source, ToolSource):
            raise UsageError(f"mcp_servers[{i}] is a {type(source).__name__}, not a tool source "
                             "(agui_engine.adapters.MCPServer)")
        if source.source_id in seen:
            raise UsageError(f"mcp_servers: two servers have the id {source.source_id!r}: give them distinct server_id")
        seen.add(source.source_id)
    return out


async def _listed(source: ToolSource) -> Sequence[SourceTool]:
    try:
        return await source.list_tools()
    except Exception as exc:  # noqa: BLE001 - a source that breaks its contract offers no tools, the run goes on
        _log.warning("tool source %s failed to list its tools: %s", source.source_id, type(exc).__name__)
        return []


#: What :func:`run_source_tools` keeps between runs: (model name, source id, id of the
#: ``SourceTool``) -> (that ``SourceTool``, the server tools built for it).
SourceToolCache = dict[tuple[str, str, int], tuple[SourceTool, list[ServerTool]]]


async def run_source_tools(
    sources: Sequence[ToolSource], taken: Sequence[str] | frozenset[str] | set[str],
    *, on_result: Callable[[str, str, SourceTool, Mapping[str, Any], SourceToolResult], None] | None = None,
    cache: SourceToolCache | None = None,
) -> list[ServerTool]:
    """The server tools of one run from ``sources`` (listed concurrently, each from its
    cache), named against ``taken`` (:func:`name_source_tools`), calling back into their
    sources (:func:`source_server_tools`). Never raises for a source's failure.

    ``cache`` (an agent's own dict, the same ``sources`` and ``on_result`` every run): a tool
    whose source hands back the same ``SourceTool`` under the same name reuses the server
    tool built for it (its strict schema is not made again: 128 tools cost ~7 ms a run);
    afterwards the cache holds only this run's tools."""
    listed = await asyncio.gather(*(_listed(s) for s in sources))
    pairs = [(source.source_id, tool) for source, tools in zip(sources, listed) for tool in tools]
    named = name_source_tools(pairs, taken)
    by_id = {s.source_id: s for s in sources}
    if cache is None:
        return source_server_tools(named, by_id, on_result=on_result)
    out: list[ServerTool] = []
    fresh: SourceToolCache = {}
    for entry in named:
        key = (entry[0], entry[1], id(entry[2]))
        hit = cache.get(key)
        built = hit[1] if hit is not None and hit[0] is entry[2] else source_server_tools([entry], by_id,
                                                                                          on_result=on_result)
        fresh[key] = (entry[2], built)
        out.extend(built)
    cache.clear()
    cache.update(fresh)
    return out


def tool_source_status(agent: object) -> list[dict[str, Any]]:
    """The :meth:`ToolSource.status` of each of ``agent.tool_sources`` (an ``LLMAgent`` or
    ``AgentLoop`` with MCP servers), ``[]`` for an agent without: what ``/readyz`` shows.
    A source whose status fails is reported as not connected, never raised."""
    out: list[dict[str, Any]] = []
    for source in getattr(agent, "tool_sources", None) or ():
        if not isinstance(source, ToolSource):
            continue
        try:
            out.append(dict(source.status()))
        except Exception as exc:  # noqa: BLE001 - a health page must answer
            out.append({"serverId": source.source_id, "connected": False, "error": type(exc).__name__})
    return out
