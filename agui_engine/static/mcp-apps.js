// MCP Apps in the inspector: the host side of SEP-1865 for an `mcp-apps` ACTIVITY_SNAPSHOT.
//
// Theory of operation
// -------------------
// An `mcp-apps` activity ({result, resourceUri, serverHash, serverId?, toolInput}, as
// @ag-ui/mcp-apps-middleware sends it) says a tool with an app has run. The host:
//
//   1. refuses a resourceUri that is not `ui://...` (nothing is fetched);
//   2. reads the resource through the gateway's proxy: a run whose forwardedProps.__proxiedMCPRequest
//      is {serverHash, serverId, method: "resources/read", params: {uri}}, POSTed to the agent endpoint
//      with the page's bearer token (so the same token / principal rules as runs apply); the answer is
//      the RUN_FINISHED result;
//   3. refuses content whose mimeType is not `text/html;profile=mcp-app` (or whose uri is not ui://);
//   4. renders the HTML in an iframe with sandbox="allow-scripts" only (never allow-same-origin: the
//      app's origin is opaque, so it cannot reach this page's DOM, cookies or storage) through srcdoc,
//      with a Content-Security-Policy <meta> first in the document, built from the content's
//      _meta.ui.csp by `appCSP` (declared domains only; anything that is not a plain origin is dropped
//      and listed on the card);
//   5. bridges the app's JSON-RPC 2.0 messages (postMessage, from that iframe's window only):
//      `ui/initialize` is answered with the host's info; after `ui/notifications/initialized` the app
//      gets `ui/notifications/tool-input` (the arguments) and `ui/notifications/tool-result` (the
//      result); `tools/call`, `resources/read`, `ping` and `notifications/message` go to the server
//      through the proxy; `ui/notifications/size-changed` sizes the frame (up to MAX_APP_HEIGHT);
//      any other request gets JSON-RPC error -32601.
//
// Every proxied request the app makes is listed on its card (method, outcome, ms).

import { EventStreamParser } from "./agui-engine.js";
import { SANDBOX_PROXY_READY, SANDBOX_RESOURCE_READY, SANDBOX_VIEW_GONE, appCSP } from "./mcp-app-sandbox.js";

export const MCP_APPS_ACTIVITY = "mcp-apps";
export const MCP_APP_MIME_TYPE = "text/html;profile=mcp-app";
export const PROXIED_REQUEST_KEY = "__proxiedMCPRequest";
// The methods an app may send to its server through the host (the middleware's proxy allowlist).
export const APP_SERVER_METHODS = ["tools/call", "resources/read", "ping", "notifications/message"];
// The tallest an app may ask its frame to be, in CSS pixels.
export const MAX_APP_HEIGHT = 2000;
export const APP_PROTOCOL_VERSION = "2025-11-21";

// The app's CSP is built where it is enforced, in the sandbox proxy (mcp-app-sandbox.js); the card shows it.
export { appCSP, withCSP } from "./mcp-app-sandbox.js";

export class AppError extends Error {}

// Check a resources/read answer: {html, csp} of its first content, or AppError saying why not.
export function appResource(uri, answer) {
  if (answer && typeof answer.error === "string") throw new AppError(`the server did not give ${uri}: ${answer.error}`);
  const content = answer && Array.isArray(answer.contents) ? answer.contents[0] : undefined;
  if (!content) throw new AppError(`the server's answer for ${uri} has no contents`);
  if (typeof content.uri !== "string" || !content.uri.startsWith("ui://")) {
    throw new AppError(`refused: the resource ${JSON.stringify(content.uri)} is not a ui:// resource`);
  }
  const mime = String(content.mimeType ?? "").replace(/\s+/g, "").toLowerCase();
  if (mime !== MCP_APP_MIME_TYPE) {
    throw new AppError(`refused: ${content.uri} has MIME type ${JSON.stringify(content.mimeType ?? null)}, ` +
                       `not ${MCP_APP_MIME_TYPE}`);
  }
  let html;
  if (typeof content.text === "string") html = content.text;
  else if (typeof content.blob === "string") html = new TextDecoder().decode(Uint8Array.from(atob(content.blob), (c) => c.charCodeAt(0)));
  else throw new AppError(`refused: ${content.uri} has neither text nor blob`);
  return { html, csp: content._meta?.ui?.csp ?? {}, meta: content._meta?.ui ?? {} };
}

// One proxied MCP request through the gateway: the RUN_FINISHED result (throws for a run that fails).
export async function proxyRequest(endpoint, headers, { serverHash, serverId }, method, params) {
  const id = Math.random().toString(36).slice(2, 12);
  const request = { serverHash, method, params };
  if (serverId !== undefined) request.serverId = serverId;
  const input = { threadId: `mcp-app-${id}`, runId: `mcp-app-${id}`, messages: [], tools: [], context: [],
                  state: {}, forwardedProps: { [PROXIED_REQUEST_KEY]: request } };
  const response = await fetch(endpoint, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(input),
  });
  if (!response.ok) {
    let detail = "";
    try { detail = (await response.json()).error?.message ?? ""; } catch { /* not JSON */ }
    throw new AppError(`the gateway refused the proxied ${method}: HTTP ${response.status} ${detail}`.trim());
  }
  const parser = new EventStreamParser("sse");
  const text = await response.text();
  for (const event of [...parser.feed(text), ...parser.close()]) {
    if (event.type === "RUN_FINISHED") return event.result;
    if (event.type === "RUN_ERROR") throw new AppError(`the proxied ${method} failed: ${event.message}`);
  }
  throw new AppError(`the proxied ${method} ended without RUN_FINISHED`);
}

// A mounted app: its card element, its frame, its bridge.
export class McpApp {
  constructor(content, { endpoint, headers, sandboxUrl, hostInfo = { name: "agui-engine inspector", version: "1" } }) {
    this.content = content;
    this.endpoint = endpoint;
    this.sandboxUrl = sandboxUrl ?? `${String(endpoint).replace(/\/+$/, "")}/static/mcp-app-sandbox.html`;
    this.headers = headers; // () => {Authorization?}
    this.hostInfo = hostInfo;
    this.log = [];
    this.initialized = false;
    this.card = document.createElement("div");
    this.card.className = "card mcp-app";
    this.card.dataset.resourceUri = content.resourceUri;
    const head = document.createElement("header");
    head.textContent = `app ${content.resourceUri}`;
    const server = document.createElement("small");
    server.textContent = content.serverId ?? content.serverHash;
    head.append(server);
    this.problem = document.createElement("div");
    this.problem.className = "app-error";
    this.notes = document.createElement("div");
    this.notes.className = "app-notes";
    this.requests = document.createElement("ol");
    this.requests.className = "app-requests";
    this.card.append(head, this.problem, this.notes);
    this.frame = null;
    this.onMessage = (event) => this.receive(event);
  }

  fail(message) {
    this.problem.textContent = message;
    this.card.dataset.state = "refused";
  }

  async mount() {
    const uri = this.content.resourceUri;
    if (typeof uri !== "string" || !uri.startsWith("ui://")) {
      this.fail(`refused: the resource ${JSON.stringify(uri)} is not a ui:// resource`);
      return;
    }
    let resource;
    try {
      resource = appResource(uri, await this.proxy("resources/read", { uri }));
    } catch (err) {
      this.fail(err instanceof AppError ? err.message : `could not read ${uri}: ${err.message}`);
      return;
    }
    const { policy, dropped } = appCSP(resource.csp);
    if (dropped.length) this.notes.textContent = `CSP: dropped ${dropped.join(", ")} (not an origin)`;
    // The app is drawn by the sandbox proxy (a page of its own, opaque origin, served by the gateway):
    // this page hands it the HTML once it says it is ready, and nothing else of the page reaches it.
    const frame = document.createElement("iframe");
    frame.setAttribute("sandbox", "allow-scripts");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.title = `MCP app ${uri}`;
    frame.dataset.csp = policy;
    if (resource.meta.prefersBorder === false) frame.classList.add("borderless");
    this.resource = resource;
    window.addEventListener("message", this.onMessage);
    frame.src = this.sandboxUrl;
    this.frame = frame;
    this.card.append(frame, this.requests);
    this.card.dataset.state = "mounted";
  }

  // A new snapshot for the same activity (replace: true): the app gets the new input and result.
  update(content) {
    this.content = content;
    if (this.initialized) this.sendToolData();
  }

  unmount() {
    window.removeEventListener("message", this.onMessage);
  }

  async proxy(method, params) {
    const start = performance.now();
    const entry = document.createElement("li");
    entry.dataset.method = method;
    try {
      const result = await proxyRequest(this.endpoint, this.headers(), this.content, method, params);
      const error = result && typeof result.error === "string" ? result.error : null;
      entry.dataset.status = error ? "error" : "ok";
      entry.textContent = `${method}${params?.name ? " " + params.name : ""}: ${error ?? "ok"} (${Math.round(performance.now() - start)} ms)`;
      return result;
    } catch (err) {
      entry.dataset.status = "error";
      entry.textContent = `${method}: ${err.message}`;
      throw err;
    } finally {
      this.log.push(entry.textContent);
      this.requests.append(entry);
    }
  }

  post(message) {
    // The frame's origin is opaque ("null"), so "*" is the only target that reaches it; what is sent
    // is what the app is shown anyway (its tool's input and result, its own calls' answers).
    this.frame?.contentWindow?.postMessage({ jsonrpc: "2.0", ...message }, "*");
  }

  sendToolData() {
    this.post({ method: "ui/notifications/tool-input", params: { arguments: this.content.toolInput ?? {} } });
    this.post({ method: "ui/notifications/tool-result", params: this.content.result ?? {} });
  }

  async receive(event) {
    if (!this.frame || event.source !== this.frame.contentWindow) return; // only this app's frame
    const msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0" || typeof msg.method !== "string") return;
    const isRequest = msg.id !== undefined && msg.id !== null;
    const answer = (result) => isRequest && this.post({ id: msg.id, result });
    const refuse = (code, message) => isRequest && this.post({ id: msg.id, error: { code, message } });
    switch (msg.method) {
      case SANDBOX_PROXY_READY:
        this.post({ method: SANDBOX_RESOURCE_READY,
                    params: { html: this.resource.html, csp: this.resource.csp } });
        return;
      case SANDBOX_VIEW_GONE:
        this.fail(`the app was removed: ${msg.params?.reason ?? "its frame navigated"}`);
        this.card.dataset.state = "gone";
        return;
      case "ui/initialize":
        answer({ protocolVersion: APP_PROTOCOL_VERSION, hostInfo: this.hostInfo,
                 hostCapabilities: { serverTools: {}, serverResources: {}, logging: {} },
                 hostContext: { theme: "light", displayMode: "inline", availableDisplayModes: ["inline"] } });
        return;
      case "ui/notifications/initialized":
        this.initialized = true;
        this.sendToolData();
        return;
      case "ui/notifications/size-changed": {
        const height = Number(msg.params?.height);
        if (Number.isFinite(height) && height > 0) this.frame.style.height = `${Math.min(height, MAX_APP_HEIGHT)}px`;
        return;
      }
      default:
        break;
    }
    if (!APP_SERVER_METHODS.includes(msg.method)) {
      refuse(-32601, `the inspector does not support ${msg.method}`);
      return;
    }
    try {
      const result = await this.proxy(msg.method, msg.params ?? {});
      if (result && typeof result.error === "string") refuse(-32603, result.error);
      else answer(result ?? {});
    } catch (err) {
      refuse(-32603, err.message);
    }
  }
}

// The apps of a page: one per activity messageId, mounted into `root` as their activities arrive.
export class McpAppHost {
  constructor(root, options) {
    this.root = root;
    this.options = options;
    this.apps = new Map();
  }

  // Feed every event; an `mcp-apps` ACTIVITY_SNAPSHOT mounts (or updates) its app.
  event(event) {
    if (event.type !== "ACTIVITY_SNAPSHOT" || event.activityType !== MCP_APPS_ACTIVITY) return null;
    const existing = this.apps.get(event.messageId);
    if (existing) {
      existing.update(event.content || {});
      return existing;
    }
    const app = new McpApp(event.content || {}, this.options);
    app.card.dataset.messageId = event.messageId;
    this.apps.set(event.messageId, app);
    this.root.append(app.card);
    app.mounted = app.mount();
    return app;
  }

  clear() {
    for (const app of this.apps.values()) app.unmount();
    this.apps.clear();
    this.root.replaceChildren();
  }
}
