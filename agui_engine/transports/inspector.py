"""The gateway's front-end routes: the shipped JavaScript applier and the inspector page.

Theory of operation
-------------------
:class:`FrontendFiles` and :func:`verify_answer` answer, below a gateway's root, whatever the
front end (aiohttp's :func:`~agui_engine.transports.sse_server.create_app`, the ASGI
:func:`~agui_engine.transports.asgi_server.create_asgi_app`)::

    GET   <path>/static/<name>   agui-engine.js (the applier, an ES module) and the inspector's files
    GET   <path>/inspect         the inspector page                        (only with inspector=True)
    POST  <path>/inspect/verify  findings of the Verifier for a stream      (only with inspector=True)

``<path>/static/a2ui-limits.js`` is made here, not read: an ES module exporting the A2UI limits of
:mod:`agui_engine.genui.a2ui` (:data:`A2UI_CHECKS_MODULE`), so the inspector checks every surface with
the very constants ``render_a2ui`` uses (``spec/limits.md``).

The files are package data of ``agui_engine`` (``agui_engine/static/``), read once
when the routes are added and served from memory with an ``ETag``; only the names
in :data:`STATIC_FILES` are served (no path from the request reaches the file
system). Nothing is fetched from elsewhere: the page works offline and needs no
build step.

Verifier findings are annotated by the server (one set of rules, the Python
:class:`~agui_engine.protocol.verify.Verifier`, rather than a second copy in JavaScript):
the page sends the events of a run as it saw them (or the bytes of a recorded
``.sse`` / ``.ndjson`` file) to ``POST <path>/inspect/verify``; the answer is
``{"format", "events", "findings": [{eventIndex, eventType, rule, message,
severity, relatedIndex}], "decodeError": {message, frameIndex} | null}``, each
finding at the 0-based index of the event that caused it. The body is limited to
:data:`MAX_RECORDING_BYTES`; a bearer token, when the gateway has one, is required
here as for runs.

An ``mcp-apps`` activity is drawn by ``mcp-apps.js`` (served with the other static files): the app's
``ui://`` resource is read through the gateway's proxy (a run with ``forwardedProps.__proxiedMCPRequest``,
with the page's bearer token, answered by the run registry), refused unless its MIME type is
``text/html;profile=mcp-app``, and drawn by the sandbox proxy ``mcp-app-sandbox.html`` (served with
:data:`SANDBOX_PROXY_HEADERS`: an opaque origin of its own) in a ``sandbox="allow-scripts"`` frame under a
CSP built from its ``_meta.ui.csp``; the app's JSON-RPC messages are bridged there (``spec/mcp.md``, MCP Apps).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from importlib import resources
from typing import Any, Final

from agui_engine.genui import a2ui
from agui_engine.protocol.codec import EventDecodeError, EventStreamDecoder
from agui_engine.protocol.errors import AguiEngineError, LimitExceededError
from agui_engine.protocol.verify import Verifier

from .http_gateway import Answer, GatewayRequest, HttpGateway, error_answer

__all__ = [
    "A2UI_CHECKS_MODULE",
    "FrontendFiles",
    "INSPECTOR_PAGE",
    "MAX_RECORDING_BYTES",
    "SANDBOX_PROXY_HEADERS",
    "STATIC_FILES",
    "a2ui_limits_module",
    "verify_answer",
    "verify_recording",
]

#: The files served under ``<path>/static/``, with their content types.
STATIC_FILES: Final = {
    "agui-engine.js": "text/javascript; charset=utf-8",
    "inspector.js": "text/javascript; charset=utf-8",
    "inspector-a2ui.js": "text/javascript; charset=utf-8",
    "inspector.css": "text/css; charset=utf-8",
    # the official A2UI v0.9 Lit renderer, vendored at a pinned version (scripts/build_a2ui_lit.py)
    "a2ui-lit.js": "text/javascript; charset=utf-8",
    "a2ui-lit.LICENSES.txt": "text/plain; charset=utf-8",
    "mcp-apps.js": "text/javascript; charset=utf-8",
    # the MCP Apps sandbox proxy: a page whose origin is opaque (SANDBOX_PROXY_HEADERS) and its module
    "mcp-app-sandbox.html": "text/html; charset=utf-8",
    "mcp-app-sandbox.js": "text/javascript; charset=utf-8",
}
#: The headers that make the sandbox proxy page a document of its own: ``sandbox allow-scripts`` gives
#: it an opaque origin however it is framed (never the gateway's, so never the inspector's), and it
#: sends no referrer. The app's own CSP is added by the proxy before it draws the app (mcp-app-sandbox.js).
SANDBOX_PROXY_HEADERS: Final = {
    "Content-Security-Policy": "sandbox allow-scripts; object-src 'none'; form-action 'none'",
    "Referrer-Policy": "no-referrer",
}
#: Extra headers per static file: the proxy page's, and CORS on the proxy's module (the page's origin is
#: opaque, so its module is a cross-origin fetch; the file is public and carries no credentials).
_FILE_HEADERS: Final[Mapping[str, Mapping[str, str]]] = {
    "mcp-app-sandbox.html": SANDBOX_PROXY_HEADERS,
    "mcp-app-sandbox.js": {"Access-Control-Allow-Origin": "*"},
}
#: The generated module of A2UI limits the inspector imports (``<path>/static/<this>``).
A2UI_CHECKS_MODULE: Final = "a2ui-limits.js"
#: Which limits it exports (names of :mod:`agui_engine.genui.a2ui`, values from there).
_A2UI_SHARED_CONSTANTS: Final = ("MAX_A2UI_COMPONENTS", "MAX_A2UI_DEPTH", "MAX_A2UI_JSON_DEPTH")
#: The inspector page (package data beside the static files).
INSPECTOR_PAGE: Final = "inspect.html"
#: Largest stream ``POST <path>/inspect/verify`` takes, in bytes. A recorded run with long
#: component props is a few MB (the bench's 2 MiB argument streams as ~5 MB of SSE frames);
#: 32 MiB leaves room for several such runs in one file while bounding what one request
#: makes the gateway decode and verify in memory.
MAX_RECORDING_BYTES: Final = 32 * 1024 * 1024


def _sniff(data: bytes) -> str:
    text = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "ndjson" if text[:1] in (b"{", b"[") else "sse"


def verify_recording(data: bytes) -> dict[str, Any]:
    """Decode (tolerantly) and verify a whole SSE or NDJSON stream; the findings, located.

    Never raises for bad input: a frame that does not decode ends the stream there
    (``decodeError``), everything before it is verified.
    """
    fmt = _sniff(data)
    decoder = EventStreamDecoder(fmt, tolerant=True)  # type: ignore[arg-type]
    verifier = Verifier(collect=True)
    events: list[str] = []
    decode_error: dict[str, Any] | None = None
    decoded: list[Any] = []
    try:
        decoded = decoder.feed(data)
        decoded += decoder.close()
    except EventDecodeError as exc:
        decode_error = {"message": exc.message, "frameIndex": getattr(exc, "frame_index", None)}
    for event in decoded:
        events.append(type(event).__name__)
        verifier.feed(event)
    if decode_error is None:
        verifier.close()
    findings = [
        {
            "eventIndex": v.event_index,
            "eventType": v.event_type,
            "rule": v.rule,
            "message": v.message,
            "severity": v.severity,
            "relatedIndex": v.related_index,
        }
        for v in sorted([*verifier.violations, *verifier.warnings], key=lambda v: v.event_index)
    ]
    return {"format": fmt, "events": len(events), "findings": findings, "decodeError": decode_error}


def _load(name: str) -> bytes:
    return resources.files("agui_engine").joinpath("static", name).read_bytes()


def a2ui_limits_module() -> bytes:
    """The ES module of :data:`A2UI_CHECKS_MODULE`: one ``export const NAME = value;`` per limit."""
    lines = ["// Generated by agui_engine.transports.inspector from agui_engine.genui.a2ui (spec/limits.md)."]
    lines += [f"export const {name} = {int(getattr(a2ui, name))};" for name in _A2UI_SHARED_CONSTANTS]
    return ("\n".join(lines) + "\n").encode()


def _file(body: bytes, content_type: str, extra: Mapping[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", **(extra or {}),
               "Content-Type": content_type}
    return body, headers


class FrontendFiles:
    """The front-end files a gateway serves below its root (``/static/<name>`` always,
    ``/inspect`` with ``inspector``), read once, answered with an ``ETag`` (304 for a
    matching ``If-None-Match``), whatever the web framework."""

    def __init__(self, *, inspector: bool) -> None:
        files = {f"/static/{name}": _file(_load(name), ctype, _FILE_HEADERS.get(name)) for name, ctype in STATIC_FILES.items()}
        files[f"/static/{A2UI_CHECKS_MODULE}"] = _file(a2ui_limits_module(), "text/javascript; charset=utf-8")
        if inspector:
            files["/inspect"] = _file(_load(INSPECTOR_PAGE), "text/html; charset=utf-8")
        self._files = files
        #: Whether the inspector (its page and ``/inspect/verify``) is served.
        self.inspector = inspector

    @property
    def paths(self) -> list[str]:
        """Every path served, below the gateway's root."""
        return list(self._files)

    def answer(self, subpath: str, if_none_match: str | None) -> Answer | None:
        """The file at ``subpath`` (None: no such file)."""
        found = self._files.get(subpath)
        if found is None:
            return None
        body, headers = found
        if if_none_match == headers["ETag"]:
            return Answer(304, {k: v for k, v in headers.items() if k != "Content-Type"})
        return Answer(200, dict(headers), body)


async def verify_answer(gateway: HttpGateway, req: GatewayRequest) -> Answer:
    """``POST <path>/inspect/verify``: the Verifier's findings for a recorded stream (the bearer
    token as for runs; the body up to MAX_RECORDING_BYTES)."""
    try:
        gateway.principal(req)
        chunks: list[bytes] = []
        total = 0
        async for chunk in req.chunks() if req.chunks is not None else _nothing():
            total += len(chunk)
            if total > MAX_RECORDING_BYTES:
                raise LimitExceededError(f"the recording is over {MAX_RECORDING_BYTES} bytes (MAX_RECORDING_BYTES)")
            chunks.append(chunk)
    except AguiEngineError as exc:
        return error_answer(exc)
    return Answer(200, {"Cache-Control": "no-store", "Content-Type": "application/json; charset=utf-8"},
                  json.dumps(verify_recording(b"".join(chunks))).encode())


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield  # pragma: no cover
