// The MCP Apps sandbox proxy (MCP Apps 2026-01-26, "Sandbox proxy"), and the CSP an app runs under.
//
// Theory of operation
// -------------------
// A host page never draws an app's HTML itself. It frames `<path>/static/mcp-app-sandbox.html` (this
// module's page), which the gateway serves with `Content-Security-Policy: sandbox allow-scripts`: the
// proxy's origin is opaque whatever the framing page says, so it differs from the host's origin and
// inherits nothing of it (no cookies, no storage, no DOM; its URL is the gateway's static path, no
// fragment, no token). Then:
//
//   1. the proxy sends `ui/notifications/sandbox-proxy-ready` to its parent;
//   2. the parent answers `ui/notifications/sandbox-resource-ready` {html, csp?} (once; from the parent
//      only: the app can never replace itself);
//   3. the proxy applies the app's CSP (`appCSP(csp)`) to ITSELF (a <meta> in its head) and only then
//      creates the inner frame: `sandbox="allow-scripts"` (no allow-same-origin, no navigation of
//      other frames, no popups, no forms), `srcdoc` = the app's HTML with the same CSP first in it.
//      The inner document inherits the proxy's policies, and every navigation of the inner frame is
//      checked against the proxy's `frame-src` (the declared `frameDomains`, else 'none'): an app
//      that sets `location.href = "http://elsewhere/?data"` is refused before any request leaves;
//   4. every other JSON-RPC message is forwarded: parent -> inner and inner -> parent, except the
//      reserved `ui/notifications/sandbox-*` methods;
//   5. should the inner frame load a second document anyway (a navigation the browser turned into an
//      error page), the proxy removes it and tells the parent `ui/notifications/sandbox-view-gone`
//      {reason} (an agui-engine addition; spec/mcp.md).
//
// `appCSP` and `withCSP` are exported for hosts that show the policy (the inspector's card).

export const SANDBOX_PROXY_READY = "ui/notifications/sandbox-proxy-ready";
export const SANDBOX_RESOURCE_READY = "ui/notifications/sandbox-resource-ready";
export const SANDBOX_VIEW_GONE = "ui/notifications/sandbox-view-gone";
export const SANDBOX_RESERVED_PREFIX = "ui/notifications/sandbox-";
// The inner frame's sandbox: scripts only (its origin stays opaque; it navigates nothing but itself,
// and that only within the CSP's frame-src).
export const VIEW_SANDBOX = "allow-scripts";

// A source expression of a declared domain: scheme://host[:port], the host may start with "*.".
const ORIGIN = /^(https?|wss?):\/\/(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:\d{1,5})?$/;

// The CSP of an app from its resource's _meta.ui.csp: {policy, dropped}. Nothing is allowed that the
// app did not declare, and inline script / style (the app's own document) only.
export function appCSP(csp = {}) {
  const dropped = [];
  const list = (key) => {
    const value = csp && Array.isArray(csp[key]) ? csp[key] : [];
    return value.filter((d) => {
      const ok = typeof d === "string" && ORIGIN.test(d);
      if (!ok) dropped.push(`${key}: ${JSON.stringify(d)}`);
      return ok;
    });
  };
  const connect = list("connectDomains");
  const resources = list("resourceDomains");
  const frames = list("frameDomains");
  const bases = list("baseUriDomains");
  const or = (xs, fallback) => (xs.length ? xs.join(" ") : fallback);
  const res = resources.join(" ");
  const policy = [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${res}`.trim(),
    `style-src 'unsafe-inline' ${res}`.trim(),
    `img-src data: blob: ${res}`.trim(),
    `font-src data: ${res}`.trim(),
    `media-src data: blob: ${res}`.trim(),
    `connect-src ${or(connect, "'none'")}`,
    `frame-src ${or(frames, "'none'")}`,
    `base-uri ${or(bases, "'none'")}`,
    "form-action 'none'",
    "object-src 'none'",
  ].join("; ");
  return { policy, dropped };
}

// The app's document with the CSP <meta> first (after a doctype, which must stay first).
export function withCSP(html, policy) {
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy.replace(/"/g, "&quot;")}">`;
  const doctype = /^\s*<!doctype[^>]*>/i.exec(html);
  return doctype ? doctype[0] + meta + html.slice(doctype[0].length) : meta + html;
}

// Run the proxy in this document (the sandbox page calls it; a no-op outside a frame).
export function runSandboxProxy(win = window) {
  const host = win.parent;
  if (!host || host === win) return null;
  const doc = win.document;
  const state = { view: null, loads: 0 };
  const notifyHost = (method, params = {}) => host.postMessage({ jsonrpc: "2.0", method, params }, "*");

  function load(params) {
    const html = typeof params?.html === "string" ? params.html : "";
    const { policy } = appCSP(params?.csp ?? {});
    const meta = doc.createElement("meta");
    meta.httpEquiv = "Content-Security-Policy";
    meta.content = policy;
    doc.head.append(meta); // the proxy's own policy first: the view's navigations are checked against it
    const view = doc.createElement("iframe");
    view.setAttribute("sandbox", VIEW_SANDBOX);
    view.setAttribute("referrerpolicy", "no-referrer");
    view.title = "MCP app";
    view.addEventListener("load", () => {
      state.loads += 1;
      if (state.loads > 1) {
        // a second document in the view: it navigated; what runs there is not the app that was loaded
        view.remove();
        state.view = null;
        notifyHost(SANDBOX_VIEW_GONE, { reason: "the app navigated its frame away" });
      }
    });
    view.srcdoc = withCSP(html, policy);
    state.view = view;
    doc.body.append(view);
  }

  win.addEventListener("message", (event) => {
    const msg = event.data;
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") return;
    const reserved = typeof msg.method === "string" && msg.method.startsWith(SANDBOX_RESERVED_PREFIX);
    if (event.source === host) {
      if (msg.method === SANDBOX_RESOURCE_READY) {
        if (!state.view && state.loads === 0) load(msg.params);
      } else if (!reserved) {
        state.view?.contentWindow?.postMessage(msg, "*");
      }
    } else if (state.view && event.source === state.view.contentWindow && !reserved) {
      host.postMessage(msg, "*");
    }
  });
  notifyHost(SANDBOX_PROXY_READY);
  return state;
}
