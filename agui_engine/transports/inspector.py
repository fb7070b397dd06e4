"""The gateway's front-end routes: the shipped JavaScript applier and the inspector page.

Theory of operation
-------------------
:func:`add_frontend_routes` adds to an aiohttp application (the SSE gateway's,
see :func:`agui_engine.transports.sse_server.create_app`)::

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
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any, Final

from aiohttp import web

from agui_engine.genui import a2ui
from agui_engine.protocol.codec import EventDecodeError, EventStreamDecoder
from agui_engine.protocol.errors import AguiEngineError, LimitExceededError
from agui_engine.protocol.verify import Verifier

from .bearer_auth import check_bearer

__all__ = [
    "A2UI_CHECKS_MODULE",
    "INSPECTOR_PAGE",
    "MAX_RECORDING_BYTES",
    "SANDBOX_PROXY_HEADERS",
    "STATIC_FILES",
    "a2ui_limits_module",
    "add_frontend_routes",
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


def _file_handler(body: bytes, content_type: str, extra: Mapping[str, str] | None = None) -> Callable[[web.Request], Any]:
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'

    async def handler(request: web.Request) -> web.StreamResponse:
        headers = {"ETag": etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", **(extra or {})}
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, headers={**headers, "Content-Type": content_type})

    return handler


def add_frontend_routes(
    app: web.Application,
    path: str,
    *,
    inspector: bool,
    auth_token: str | Mapping[str, str] | None,
    error_response: Callable[[AguiEngineError], web.Response],
) -> None:
    """Add the static files (always) and the inspector (``inspector=True``) under ``path``."""
    base = path.rstrip("/")
    for name, content_type in STATIC_FILES.items():
        app.router.add_get(f"{base}/static/{name}", _file_handler(_load(name), content_type, _FILE_HEADERS.get(name)))
    app.router.add_get(f"{base}/static/{A2UI_CHECKS_MODULE}",
                       _file_handler(a2ui_limits_module(), "text/javascript; charset=utf-8"))
    if not inspector:
        return
    app.router.add_get(f"{base}/inspect", _file_handler(_load(INSPECTOR_PAGE), "text/html; charset=utf-8"))

    async def verify(request: web.Request) -> web.StreamResponse:
        try:
            check_bearer(request.headers.get("Authorization"), auth_token)
            chunks: list[bytes] = []
            total = 0
            async for chunk in request.content.iter_chunked(64 * 1024):
                total += len(chunk)
                if total > MAX_RECORDING_BYTES:
                    raise LimitExceededError(
                        f"the recording is over {MAX_RECORDING_BYTES} bytes (MAX_RECORDING_BYTES)")
                chunks.append(chunk)
        except AguiEngineError as exc:
            return error_response(exc)
        return web.json_response(verify_recording(b"".join(chunks)), headers={"Cache-Control": "no-store"})

    app.router.add_post(f"{base}/inspect/verify", verify)
