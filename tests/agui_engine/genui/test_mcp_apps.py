"""MCP Apps, the pure part: the server hash against the npm middleware's ``getServerHash`` under
node, UI tool metadata, the server table, proxied request parsing, the activity and the proxy's
answers over a connection of the test's own."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_engine.genui.mcp_apps import (
    MAX_SHOWN_APPS,
    MCP_APP_ANNOUNCE_EVENT,
    MCP_APPS_ACTIVITY_TYPE,
    NOT_UI_RESOURCE_ERROR,
    PROXY_METHODS,
    REQUEST_FAILED_ERROR,
    AppServer,
    AppServerTable,
    AppSource,
    AppTool,
    AppToolResult,
    McpAppsProxy,
    ProxiedRequest,
    ProxiedRequestError,
    ShownApps,
    is_model_visible_ui_tool,
    is_proxied,
    js_json_stringify,
    mcp_apps_activity,
    proxied_request,
    server_hash,
    text_of_result,
    ui_resource_uri,
)
from agui_engine.loops.tool_sources import SourceTool, SourceToolResult, run_source_tools
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.errors import UpstreamError, UsageError
from agui_engine.protocol.events import CustomEvent, RunAgentInput, RunFinishedEvent, RunStartedEvent
from tests.helpers import node_with

JS_DIR = Path(__file__).resolve().parents[2] / "js"


def _node_hashes(servers: list[dict[str, Any]]) -> list[str]:
    node = node_with("@ag-ui/mcp-apps-middleware")
    done = subprocess.run([node, "mcp_apps_middleware.mjs"], cwd=JS_DIR, input=json.dumps({"servers": servers}),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hashes: list[str] = json.loads(done.stdout)["hashes"]
    return hashes


URLS = [
    "http://127.0.0.1:8080/mcp",
    "https://example.test/mcp?x=1&y=\"2\"",
    "https://bücher.example/mcp/ünïcode",
    "http://h/back\\slash/tab\t/nl\n/ctl\x01\x1f/del\x7f",
    "https://example.test/😀/\u2028\u2029",
]


def test_the_server_hash_is_the_middlewares_getServerHash() -> None:
    servers = [{"type": t, "url": u} for u in URLS for t in ("http", "sse")]
    servers.append({"type": "http", "url": URLS[0], "headers": {"Authorization": "Bearer secret"}, "serverId": "a"})
    ours = [server_hash(s["type"], s["url"]) for s in servers]
    assert ours == _node_hashes(servers)
    # headers and serverId are not part of it: the front end never learns the credentials
    assert ours[-1] == ours[0]


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.text(min_size=0, max_size=40), min_size=40, max_size=40))
def test_the_server_hash_matches_for_any_text(urls: list[str]) -> None:
    # one node process for 40 random strings (lone surrogates included: JSON.stringify escapes them)
    servers = [{"type": "http", "url": u} for u in urls]
    assert [server_hash("http", u) for u in urls] == _node_hashes(servers)


def test_js_json_stringify_refuses_what_it_cannot_reproduce() -> None:
    assert js_json_stringify({"a": [1, True, None, "é"]}) == '{"a":[1,true,null,"é"]}'
    assert js_json_stringify("\ud800") == '"\\ud800"'
    with pytest.raises(UsageError, match="floats"):
        js_json_stringify({"a": 1.5})
    with pytest.raises(UsageError, match="not a JSON value"):
        js_json_stringify({"a": object()})


@pytest.mark.parametrize(
    ("meta", "uri", "visible"),
    [
        ({"ui": {"resourceUri": "ui://a"}}, "ui://a", True),
        ({"ui/resourceUri": "ui://legacy"}, "ui://legacy", True),
        ({"ui": {"resourceUri": "ui://a"}, "ui/resourceUri": "ui://legacy"}, "ui://a", True),
        ({"ui": {"resourceUri": 3}, "ui/resourceUri": "ui://legacy"}, "ui://legacy", True),
        ({"ui": {"resourceUri": "ui://a", "visibility": ["model", "app"]}}, "ui://a", True),
        ({"ui": {"resourceUri": "ui://a", "visibility": ["app"]}}, "ui://a", False),
        ({"ui": {"resourceUri": "ui://a", "visibility": "model"}}, "ui://a", False),
        ({"ui": {"visibility": ["model"]}}, None, False),
        (None, None, False),
    ],
)
def test_ui_tools_are_read_as_the_middleware_reads_them(meta: Any, uri: str | None, visible: bool) -> None:
    tool = {"name": "t"} if meta is None else {"name": "t", "_meta": meta}
    assert ui_resource_uri(tool) == uri
    assert is_model_visible_ui_tool(tool) is visible


@pytest.mark.parametrize(
    ("result", "text"),
    [
        ({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "x"}, {"type": "text", "text": "b"}]},
         "a\nb"),
        ({"content": [{"type": "image", "data": "x", "mimeType": "image/png"}]},
         '[{"type":"image","data":"x","mimeType":"image/png"}]'),
        ({"content": [{"type": "text", "text": ""}]}, '[{"type":"text","text":""}]'),
        ({"content": []}, "[]"),
        ({}, ""),
    ],
)
def test_the_text_of_a_result_is_the_middlewares(result: dict[str, Any], text: str) -> None:
    assert text_of_result(result) == text


def test_the_activity_has_the_middlewares_shape() -> None:
    event = mcp_apps_activity(message_id="m", result={"content": []}, resource_uri="ui://a", server_hash="h",
                              server_id=None, tool_input={"x": 1})
    assert json.loads(encode_event(event)) == {
        "type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": MCP_APPS_ACTIVITY_TYPE, "replace": True,
        "content": {"result": {"content": []}, "resourceUri": "ui://a", "serverHash": "h", "toolInput": {"x": 1}},
    }
    with_id = mcp_apps_activity(message_id="m", result={}, resource_uri="ui://a", server_hash="h",
                                server_id="s", tool_input={})
    assert with_id.content["serverId"] == "s"
    app = AppToolResult(result={"content": [{"type": "text", "text": "oops"}], "isError": True},
                        resource_uri="ui://a", server=AppServer(type="http", url="http://x/mcp", server_id="s"))
    assert (app.text, app.is_error) == ("oops", True)
    assert app.activity("m2", {"a": 1}).content["serverHash"] == server_hash("http", "http://x/mcp")


def test_proxied_requests_are_read_with_a_path_in_every_error() -> None:
    assert proxied_request(None) is None
    for falsy in (None, False, "", 0):  # JavaScript's falsy values: an agent run, as for the middleware
        assert not is_proxied({"__proxiedMCPRequest": falsy})
    assert is_proxied({"__proxiedMCPRequest": {}}) and is_proxied({"__proxiedMCPRequest": []})
    assert proxied_request({"other": 1}) is None
    assert proxied_request({"__proxiedMCPRequest": None}) is None
    request = proxied_request({"__proxiedMCPRequest": {"serverHash": "h", "method": "ping"}})
    assert request == ProxiedRequest(server_hash="h", server_id=None, method="ping", params=None)
    for bad, where in [
        ("x", r"__proxiedMCPRequest must be an object"),
        ({"serverHash": "h"}, r"__proxiedMCPRequest\.method must be a string"),
        ({"method": "ping", "params": []}, r"__proxiedMCPRequest\.params must be an object"),
        ({"method": "ping", "serverId": 3}, r"__proxiedMCPRequest\.serverId must be a string, not int"),
    ]:
        with pytest.raises(ProxiedRequestError, match=where) as info:
            proxied_request({"__proxiedMCPRequest": bad})
        assert info.value.http_status == 400


def test_the_server_table_looks_up_as_the_middleware() -> None:
    a = AppServer(type="http", url="http://a/mcp")
    b1 = AppServer(type="http", url="http://b/mcp", server_id="b1")
    b2 = AppServer(type="http", url="http://b/mcp", server_id="b2")
    table = AppServerTable([a, b1, b2])
    look = table.lookup
    assert look(ProxiedRequest(server_hash=a.hash, server_id=None, method="ping", params=None)) is a
    # an id wins; an unknown id falls back to the hash
    assert look(ProxiedRequest(server_hash=a.hash, server_id="b2", method="ping", params=None)) is b2
    assert look(ProxiedRequest(server_hash=a.hash, server_id="zz", method="ping", params=None)) is a
    # a shared endpoint is reachable by id only
    assert look(ProxiedRequest(server_hash=b1.hash, server_id=None, method="ping", params=None)) is None
    with pytest.raises(UsageError, match="sharing an endpoint require distinct serverId"):
        AppServerTable([a, AppServer(type="http", url="http://a/mcp", server_id="x")])
    with pytest.raises(UsageError, match="distinct serverId values"):
        AppServerTable([b1, AppServer(type="sse", url="http://c/mcp", server_id="b1")])


class _Connection:
    """A connection of the test's own: answers from a table, records what it was sent."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.fail = fail

    async def request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        self.sent.append(("request", method, params))
        if self.fail:
            raise UpstreamError("the server is down (https://secret@host)")
        return {} if method == "ping" else {"echo": [method, params]}

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        self.sent.append(("notify", method, params))


def _answer(proxy: McpAppsProxy, request: dict[str, Any], check: Any = None) -> list[Any]:
    input = RunAgentInput(thread_id="t", run_id="r", messages=[], forwarded_props={"__proxiedMCPRequest": request})
    parsed = proxied_request(input.forwarded_props)
    assert parsed is not None

    async def go() -> list[Any]:
        return [e async for e in proxy.run(input, parsed, check)]

    return asyncio.run(go())


def test_the_proxy_answers_forwards_refuses_and_hides_failures(caplog: pytest.LogCaptureFixture) -> None:
    server = AppServer(type="http", url="http://a/mcp", server_id="a")
    down = AppServer(type="http", url="http://down/mcp")
    conn, broken = _Connection(), _Connection(fail=True)
    proxy = McpAppsProxy([(server, conn), (down, broken)])
    events = _answer(proxy, {"serverHash": server.hash, "method": "tools/call", "params": {"name": "x"}})
    assert events == [RunStartedEvent(thread_id="t", run_id="r"),
                      RunFinishedEvent(thread_id="t", run_id="r", result={"echo": ["tools/call", {"name": "x"}]})]
    assert _answer(proxy, {"serverId": "a", "method": "ping"})[-1].result == {}
    assert _answer(proxy, {"serverId": "a", "method": "notifications/message", "params": {"level": "info"}}
                   )[-1].result == {"success": True}
    assert conn.sent[-1] == ("notify", "notifications/message", {"level": "info"})
    sent = len(conn.sent)
    assert _answer(proxy, {"serverId": "a", "method": "tools/list"})[-1].result == {
        "error": "Error: MCP method not allowed for UI proxy: tools/list"}
    assert _answer(proxy, {"serverHash": "nope", "method": "ping"})[-1].result == {"error": "Unknown server: nope"}
    assert _answer(proxy, {"method": "ping"})[-1].result == {"error": "Unknown server: undefined"}
    assert len(conn.sent) == sent  # refused before any connection was used
    with caplog.at_level("WARNING"):
        assert _answer(proxy, {"serverHash": down.hash, "method": "resources/read", "params": {"uri": "ui://a"}}
                       )[-1].result == {"error": REQUEST_FAILED_ERROR}
    assert "UpstreamError" in caplog.text and down.hash in caplog.text
    assert set(PROXY_METHODS) == {"tools/call", "resources/read", "notifications/message", "ping"}


def _req(method: str, **params: Any) -> ProxiedRequest:
    return ProxiedRequest(server_hash=None, server_id="a", method=method, params=params or None)


def test_shown_apps_record_what_each_principal_was_shown_and_refuse_the_rest() -> None:
    a = AppServer(type="http", url="http://a/mcp", server_id="a")
    b = AppServer(type="http", url="http://b/mcp")
    shown = ShownApps(AppServerTable([a, b]))
    # alice: announced (at the call's start) by id, shown (the activity) by hash; bob: nothing of a
    shown.note("alice", AppTool(resource_uri="ui://a/one", server=a).announce("c1", "show_one"))
    shown.note("alice", mcp_apps_activity(message_id="m", result={}, resource_uri="ui://a/two",
                                          server_hash=a.hash, server_id=None, tool_input={}))
    shown.note("bob", AppTool(resource_uri="ui://b/app", server=b).announce("c2", "show_b"))
    # what names no app, no ui:// resource or no known server is no app shown
    shown.note("bob", CustomEvent(name="other", value={"resourceUri": "ui://a/one", "serverId": "a"}))
    shown.note("bob", CustomEvent(name=MCP_APP_ANNOUNCE_EVENT, value={"resourceUri": "data://a", "serverId": "a"}))
    shown.note("bob", CustomEvent(name=MCP_APP_ANNOUNCE_EVENT, value={"resourceUri": "ui://a/x", "serverId": "zz"}))
    shown.note("bob", CustomEvent(name=MCP_APP_ANNOUNCE_EVENT, value=["ui://a/one"]))
    shown.note("bob", mcp_apps_activity(message_id="m", result={}, resource_uri="ui://a/one",
                                        server_hash="0" * 32, server_id=None, tool_input={}))
    assert shown.shown("alice", a) == {"ui://a/one", "ui://a/two"} and shown.shown("bob", a) == frozenset()
    assert shown.shown("bob", b) == {"ui://b/app"} and shown.shown(None, a) == frozenset()
    assert len(shown) == 3

    assert shown.refusal("alice", a, _req("resources/read", uri="ui://a/one")) is None
    assert shown.refusal("alice", a, _req("tools/call", name="app_only")) is None
    assert shown.refusal("alice", a, _req("ping")) is None
    refused_read = {"error": "Error: MCP resource not shown in this principal's runs (the UI proxy reads only "
                             "the ui:// resources of apps they showed)"}
    assert shown.refusal("alice", a, _req("resources/read", uri="ui://a/three")) == refused_read
    assert shown.refusal("alice", b, _req("resources/read", uri="ui://b/app")) == refused_read
    assert shown.refusal("alice", a, _req("resources/read", uri="file:///etc/passwd")) == {"error": NOT_UI_RESOURCE_ERROR}
    assert shown.refusal("alice", a, _req("resources/read")) == {"error": NOT_UI_RESOURCE_ERROR}
    assert shown.refusal("bob", a, _req("tools/call", name="app_only")) == {
        "error": "Error: MCP tools/call refused: no app of this server was shown in this principal's runs"}
    assert shown.refusal("bob", a, _req("notifications/message", level="info")) is not None
    assert shown.refusal(None, a, _req("ping")) is not None  # auth off is one principal of its own
    with pytest.raises(UsageError, match="at least 1"):
        ShownApps(AppServerTable([a]), limit=0)


def test_shown_apps_keep_at_most_their_limit_forgetting_the_least_recently_used() -> None:
    a = AppServer(type="http", url="http://a/mcp", server_id="a")
    shown = ShownApps(AppServerTable([a]), limit=3)
    for n in range(3):
        shown.note("p", AppTool(resource_uri=f"ui://a/{n}", server=a).announce(f"c{n}", "t"))
    assert shown.refusal("p", a, _req("resources/read", uri="ui://a/0")) is None  # used: now the most recent
    shown.note("q", AppTool(resource_uri="ui://a/q", server=a).announce("cq", "t"))  # forgets p's ui://a/1
    assert len(shown) == 3 and shown.shown("p", a) == {"ui://a/0", "ui://a/2"}
    assert shown.refusal("p", a, _req("resources/read", uri="ui://a/1")) is not None
    for n in range(3):  # q's apps push out all of p's: p reaches the server no more
        shown.note("q", AppTool(resource_uri=f"ui://a/q{n}", server=a).announce("c", "t"))
    assert shown.shown("p", a) == frozenset() and len(shown) == 3
    assert shown.refusal("p", a, _req("tools/call", name="x")) is not None
    assert shown.refusal("q", a, _req("tools/call", name="x")) is None
    assert MAX_SHOWN_APPS == 10_000 and ShownApps(AppServerTable([])).limit == MAX_SHOWN_APPS


def test_a_check_refuses_after_the_server_and_method_and_before_any_connection() -> None:
    server = AppServer(type="http", url="http://a/mcp", server_id="a")
    conn = _Connection()
    proxy = McpAppsProxy([(server, conn)])
    shown = ShownApps(proxy.table)

    def check(principal: str) -> Any:
        return lambda srv, req: shown.refusal(principal, srv, req)

    read = {"serverId": "a", "method": "resources/read", "params": {"uri": "ui://a/app"}}
    assert _answer(proxy, read, check("p"))[-1].result == {
        "error": "Error: MCP resource not shown in this principal's runs (the UI proxy reads only "
                 "the ui:// resources of apps they showed)"}
    # an unknown server and a refused method are answered as the middleware answers, whatever was shown
    assert _answer(proxy, {"serverId": "zz", "method": "ping"}, check("p"))[-1].result == {"error": "Unknown server: zz"}
    assert _answer(proxy, {"serverId": "a", "method": "tools/list"}, check("p"))[-1].result == {
        "error": "Error: MCP method not allowed for UI proxy: tools/list"}
    assert conn.sent == []
    shown.note("p", AppTool(resource_uri="ui://a/app", server=server).announce("c", "t"))
    assert _answer(proxy, read, check("p"))[-1].result == {"echo": ["resources/read", {"uri": "ui://a/app"}]}
    assert _answer(proxy, read, check("q"))[-1].result != {"echo": ["resources/read", {"uri": "ui://a/app"}]}
    assert len(conn.sent) == 1


class _Source(_Connection):
    """A tool source with apps (an AppSource), of the test's own."""

    source_id = "counter"
    app_server = AppServer(type="http", url="http://counter/mcp")

    def __init__(self, is_error: bool = False) -> None:
        super().__init__()
        self.is_error = is_error

    async def list_tools(self) -> list[SourceTool]:
        return [SourceTool(name="show", meta={"ui": {"resourceUri": "ui://c/app"}}),
                SourceTool(name="only_app", meta={"ui": {"visibility": ["app"]}}),
                SourceTool(name="plain")]

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> SourceToolResult:
        raw = {"content": [{"type": "text", "text": f"{name} ran"}], "isError": self.is_error}
        return SourceToolResult(text=f"{name} ran", is_error=self.is_error, raw=raw)

    def status(self) -> dict[str, Any]:
        return {"serverId": self.source_id, "connected": True}


@pytest.mark.parametrize("is_error", [False, True])
def test_source_tools_with_apps_return_app_results_and_app_only_tools_are_not_offered(is_error: bool) -> None:
    source = _Source(is_error)
    assert isinstance(source, AppSource)

    async def go() -> tuple[list[str], Any, Any]:
        tools = await run_source_tools([source], set())
        by_name = {t.name: t for t in tools}
        return sorted(by_name), await by_name["show"].call({}), by_name["plain"].call({})

    names, shown, plain = asyncio.run(go())
    assert names == ["plain", "show"]  # only_app is for its app alone
    assert isinstance(shown, AppToolResult) and shown.resource_uri == "ui://c/app"
    assert shown.server is source.app_server and shown.is_error is is_error
    proxy = McpAppsProxy.of_sources([source, object()])
    assert proxy.servers == (source.app_server,)
    if is_error:
        with pytest.raises(UpstreamError):
            asyncio.run(plain)
    else:
        assert asyncio.run(plain) == "plain ran"


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=12)
_request_like = st.fixed_dictionaries({}, optional={"serverHash": _json, "serverId": _json, "method": _json,
                                                     "params": _json})


@given(st.one_of(_json, st.dictionaries(st.just("__proxiedMCPRequest"), st.one_of(_json, _request_like))))
def test_any_forwarded_props_are_a_request_none_or_a_typed_error(forwarded: Any) -> None:
    try:
        request = proxied_request(forwarded)
    except ProxiedRequestError as exc:
        assert exc.message.startswith("forwardedProps.__proxiedMCPRequest")
        return
    if request is not None:
        assert isinstance(request.method, str)
        assert request.params is None or isinstance(request.params, dict)
