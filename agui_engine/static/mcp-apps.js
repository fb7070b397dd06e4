// MCP Apps host: the host side of MCP Apps (stable 2026-01-26) for `mcp-apps` activities, for the
// inspector and for applications (agui-engine.js re-exports it).
//
// Theory of operation
// -------------------
// An `mcp-apps` activity ({result, resourceUri, serverHash, serverId?, toolInput}, as
// @ag-ui/mcp-apps-middleware sends it) says a tool with an app has run. agui-engine's gateway may also
// announce the app when the tool call STARTS (CUSTOM `agui_engine.mcp_apps.app` {toolCallId,
// resourceUri, serverHash, serverId?}) and stream its input as the model types (CUSTOM
// `agui_engine.mcp_apps.tool_input` {toolCallId, operations}: the arguments' JSON Patch operations from
// the gateway's one parse; spec/mcp.md). The host (`McpAppHost.event(event)`, fed every event):
//
//   1. refuses a resourceUri that is not `ui://...` (nothing is fetched);
//   2. reads the resource through the gateway's proxy: a run whose forwardedProps.__proxiedMCPRequest
//      is {serverHash, serverId, method: "resources/read", params: {uri}}, POSTed to the agent endpoint
//      with the page's bearer token; the answer is the RUN_FINISHED result;
//   3. refuses content whose mimeType is not `text/html;profile=mcp-app` (or whose uri is not ui://);
//   4. draws it through the sandbox proxy (mcp-app-sandbox.html: an opaque origin of its own, which puts
//      the app's CSP on itself and on the app's frame, and refuses the app's navigation);
//   5. bridges the app's JSON-RPC 2.0 messages (from the proxy's window only):
//
//      app -> host                    answer
//      ui/initialize                  {protocolVersion, hostInfo, hostCapabilities, hostContext}
//      ui/notifications/initialized   then: the latest partial input, the input, the result (or cancel)
//      ui/open-link {url}             the user is asked first (`confirmLink`); {} or -32000 (denied,
//                                     not http(s)/mailto)
//      ui/message {role, content}     a user turn the page can send (`message`); {} once sent, -32000
//                                     when the user discards it
//      ui/update-model-context        kept (the last one per app) for the next run's context; {}
//      ui/request-display-mode        inline / fullscreen / pip when the app declared it; {mode}, then
//                                     ui/notifications/host-context-changed
//      ui/notifications/size-changed  the frame's height (inline; up to MAX_APP_HEIGHT)
//      ui/notifications/request-teardown  the host tears the app down (ui/resource-teardown first)
//      ping                           {}
//      tools/call, resources/read     through the proxy; its {"error"} -> -32603
//      notifications/message          through the proxy (the app's log line), listed on the card
//      anything else                  -32601 (ui/download-file and sampling are not in 2026-01-26)
//
//      host -> app: ui/notifications/tool-input-partial (while the model types), tool-input,
//      tool-result, tool-cancelled (the run ended without the call's result), host-context-changed,
//      and the request ui/resource-teardown (answered, or TEARDOWN_TIMEOUT_MS) before a frame goes.
//
// The user is in control: `options.confirmLink(url, app)` and `options.message(text, app)` return
// promises of a decision (defaults: a prompt on the app's card); `host.modelContext()` is the context
// entries the next run sends (AG-UI `Context`: {description, value}).
//
// Every proxied request the app makes is listed on its card (method, outcome, ms).

import { EventStreamParser, applyOperations } from "./agui-engine.js";
import { SANDBOX_PROXY_READY, SANDBOX_RESOURCE_READY, SANDBOX_VIEW_GONE, appCSP } from "./mcp-app-sandbox.js";

// The app's CSP is built where it is enforced, in the sandbox proxy (mcp-app-sandbox.js); the card shows it.
export { appCSP, withCSP } from "./mcp-app-sandbox.js";

export const MCP_APPS_ACTIVITY = "mcp-apps";
export const MCP_APP_MIME_TYPE = "text/html;profile=mcp-app";
export const PROXIED_REQUEST_KEY = "__proxiedMCPRequest";
// agui-engine's announcement of an app at its tool call's start, and its input as the model types.
export const MCP_APP_ANNOUNCE_EVENT = "agui_engine.mcp_apps.app";
export const MCP_APP_INPUT_EVENT = "agui_engine.mcp_apps.tool_input";
// The methods an app may send to its server through the host (the middleware's proxy allowlist; ping
// is answered by the host itself).
export const APP_SERVER_METHODS = ["tools/call", "resources/read", "notifications/message"];
// The tallest an app may ask its frame to be, in CSS pixels.
export const MAX_APP_HEIGHT = 2000;
// How long the host waits for the app's answer to ui/resource-teardown before removing it anyway.
export const TEARDOWN_TIMEOUT_MS = 3000;
export const APP_PROTOCOL_VERSION = "2026-01-26";
// The versions this host speaks; an app asking for another one gets APP_PROTOCOL_VERSION.
export const APP_PROTOCOL_VERSIONS = ["2026-01-26", "2025-11-21"];
export const DISPLAY_MODES = ["inline", "fullscreen", "pip"];
// The schemes ui/open-link may open (after the user says yes).
export const OPEN_LINK_SCHEMES = ["http:", "https:", "mailto:"];

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

// The text of a ui/message's content: ContentBlock[] (the SDK) or one block (the spec's example).
function messageText(content) {
  const blocks = Array.isArray(content) ? content : content && typeof content === "object" ? [content] : null;
  if (!blocks || !blocks.length) return null;
  const texts = blocks.filter((b) => b && b.type === "text" && typeof b.text === "string").map((b) => b.text);
  return texts.length === blocks.length ? texts.join("\n") : null;
}

const element = (tag, cls, text) => {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
};

// A question on the app's card with its buttons; resolves to the chosen answer's value.
function ask(card, question, answers) {
  return new Promise((resolve) => {
    const box = element("div", "app-prompt");
    box.append(element("span", "app-question", question));
    for (const [label, value] of answers) {
      const button = element("button", "", label);
      button.type = "button";
      button.dataset.answer = String(value);
      button.addEventListener("click", () => { box.remove(); resolve(value); });
      box.append(button);
    }
    card.append(box);
  });
}

// A mounted app: its card element, its frame (the sandbox proxy), its bridge.
export class McpApp {
  constructor(content, options) {
    const { endpoint, headers, sandboxUrl, hostInfo = { name: "agui-engine inspector", version: "1" } } = options;
    this.options = options;
    this.content = content;
    this.endpoint = endpoint;
    this.headers = headers; // () => {Authorization?}
    this.hostInfo = hostInfo;
    this.sandboxUrl = sandboxUrl ?? `${String(endpoint).replace(/\/+$/, "")}/static/mcp-app-sandbox.html`;
    this.log = [];
    this.initialized = false;
    this.appCapabilities = {};
    this.displayMode = "inline";
    this.partial = undefined; // the arguments so far while the model types
    this.sentInput = false;
    this.cancelled = null; // the reason, once cancelled
    this.modelContext = null; // the app's last ui/update-model-context params
    this.nextId = 1;
    this.pending = new Map(); // id of a host request -> resolve
    this.card = element("div", "card mcp-app");
    this.card.dataset.resourceUri = content.resourceUri;
    this.card.dataset.displayMode = "inline";
    const head = element("header", "", `app ${content.resourceUri}`);
    head.append(element("small", "", content.serverId ?? content.serverHash));
    this.controls = element("span", "app-controls");
    for (const mode of DISPLAY_MODES) {
      const button = element("button", "", mode);
      button.type = "button";
      button.dataset.mode = mode;
      button.title = `show the app ${mode}`;
      button.addEventListener("click", () => this.setDisplayMode(mode));
      this.controls.append(button);
    }
    const close = element("button", "app-close", "close");
    close.type = "button";
    close.addEventListener("click", () => this.teardown("closed by the user"));
    this.controls.append(close);
    head.append(this.controls);
    this.problem = element("div", "app-error");
    this.notes = element("div", "app-notes");
    this.context = element("div", "app-context");
    this.requests = element("ol", "app-requests");
    this.card.append(head, this.problem, this.notes, this.context);
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

  // ------------------------------------------------------------------ host -> app

  post(message) {
    // The proxy's origin is opaque ("null"), so "*" is the only target that reaches it; what is sent
    // is what the app is shown anyway (its tool's input and result, its own calls' answers).
    this.frame?.contentWindow?.postMessage({ jsonrpc: "2.0", ...message }, "*");
  }

  notify(method, params) {
    if (this.initialized) this.post({ method, params });
  }

  request(method, params) {
    const id = `host-${this.nextId++}`;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.post({ id, method, params });
    });
  }

  // The arguments so far (agui_engine.mcp_apps.tool_input): forwarded until the whole input is known.
  inputOperations(operations) {
    if (this.sentInput || this.cancelled) return;
    try {
      this.partial = applyOperations(this.partial === undefined ? {} : this.partial, operations);
    } catch (err) {
      this.notes.textContent = `partial input dropped: ${err.message}`;
      return;
    }
    this.notify("ui/notifications/tool-input-partial", { arguments: structuredClone(this.partial) });
  }

  // A snapshot of the activity (replace: true): the app gets the whole input and the result.
  update(content) {
    this.content = { ...this.content, ...content };
    if (this.initialized) this.sendToolData();
  }

  // The call ended without a result (the run failed or was stopped).
  cancel(reason) {
    if (this.cancelled || this.content.result !== undefined) return;
    this.cancelled = reason;
    this.card.dataset.toolState = "cancelled";
    this.notify("ui/notifications/tool-cancelled", { reason });
  }

  sendToolData() {
    if (this.content.toolInput !== undefined) {
      this.post({ method: "ui/notifications/tool-input", params: { arguments: this.content.toolInput ?? {} } });
      this.sentInput = true;
    } else if (this.partial !== undefined) {
      this.post({ method: "ui/notifications/tool-input-partial", params: { arguments: structuredClone(this.partial) } });
    }
    if (this.content.result !== undefined) {
      this.post({ method: "ui/notifications/tool-result", params: this.content.result ?? {} });
    } else if (this.cancelled) {
      this.post({ method: "ui/notifications/tool-cancelled", params: { reason: this.cancelled } });
    }
  }

  hostContext() {
    const width = Math.round(this.card.getBoundingClientRect().width) || undefined;
    return {
      theme: "light", platform: "web", displayMode: this.displayMode, availableDisplayModes: [...DISPLAY_MODES],
      containerDimensions: this.displayMode === "inline" ? { ...(width ? { width } : {}), maxHeight: MAX_APP_HEIGHT }
        : { width: window.innerWidth, height: window.innerHeight },
      locale: navigator.language, timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      userAgent: this.hostInfo.name,
      // the tool as its server lists it, when the gateway announced the call (MCP_APP_ANNOUNCE_EVENT)
      ...(this.content.tool ? { toolInfo: { id: this.content.toolCallId, tool: this.content.tool } } : {}),
    };
  }

  // The user (or the app, when it declared the mode) changes how the app is shown.
  setDisplayMode(mode) {
    if (!DISPLAY_MODES.includes(mode) || mode === this.displayMode) return this.displayMode;
    this.displayMode = mode;
    this.card.dataset.displayMode = mode;
    if (this.frame && mode !== "inline") this.frame.style.height = "";
    const { displayMode, containerDimensions } = this.hostContext();
    this.notify("ui/notifications/host-context-changed", { displayMode, containerDimensions });
    return mode;
  }

  // ui/resource-teardown, its answer (or TEARDOWN_TIMEOUT_MS), then the frame goes.
  async teardown(reason) {
    if (this.torn) return this.torn;
    this.torn = (async () => {
      if (this.frame && this.initialized) {
        const answered = await Promise.race([this.request("ui/resource-teardown", { reason }).then(() => true),
                                             new Promise((resolve) => setTimeout(() => resolve(false), TEARDOWN_TIMEOUT_MS))]);
        this.note("ui/resource-teardown", answered ? "ok" : "error",
                  answered ? "answered" : `no answer within ${TEARDOWN_TIMEOUT_MS} ms`);
      }
      this.unmount();
      this.frame?.remove();
      this.frame = null;
      this.card.dataset.state = "closed";
      this.problem.textContent = `closed: ${reason}`;
      this.options.onClose?.(this);
    })();
    return this.torn;
  }

  unmount() {
    window.removeEventListener("message", this.onMessage);
  }

  async proxy(method, params) {
    const start = performance.now();
    const entry = element("li");
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

  // A host-side event on the card's list (what the app asked and what the host did).
  note(method, status, text) {
    const entry = element("li", "", `${method}: ${text}`);
    entry.dataset.method = method;
    entry.dataset.status = status;
    this.log.push(entry.textContent);
    this.requests.append(entry);
  }

  // ------------------------------------------------------------------ app -> host

  async receive(event) {
    if (!this.frame || event.source !== this.frame.contentWindow) return; // only this app's proxy
    const msg = event.data;
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") return;
    if (typeof msg.method !== "string") { // an answer to one of the host's requests
      const resolve = this.pending.get(msg.id);
      if (resolve) { this.pending.delete(msg.id); resolve(msg); }
      return;
    }
    const isRequest = msg.id !== undefined && msg.id !== null;
    const answer = (result) => isRequest && this.post({ id: msg.id, result });
    const refuse = (code, message) => isRequest && this.post({ id: msg.id, error: { code, message } });
    const params = msg.params && typeof msg.params === "object" ? msg.params : {};
    switch (msg.method) {
      case SANDBOX_PROXY_READY:
        this.post({ method: SANDBOX_RESOURCE_READY, params: { html: this.resource.html, csp: this.resource.csp } });
        return;
      case SANDBOX_VIEW_GONE:
        this.fail(`the app was removed: ${params.reason ?? "its frame navigated"}`);
        this.card.dataset.state = "gone";
        return;
      case "ui/initialize": {
        const asked = params.protocolVersion;
        this.appCapabilities = params.appCapabilities && typeof params.appCapabilities === "object" ? params.appCapabilities : {};
        answer({
          protocolVersion: APP_PROTOCOL_VERSIONS.includes(asked) ? asked : APP_PROTOCOL_VERSION,
          hostInfo: this.hostInfo,
          hostCapabilities: {
            openLinks: {}, serverTools: {}, serverResources: {}, logging: {},
            updateModelContext: { text: {}, structuredContent: {} }, message: { text: {} },
            sandbox: { permissions: {}, csp: this.keptCsp() },
          },
          hostContext: this.hostContext(),
        });
        return;
      }
      case "ui/notifications/initialized":
        if (this.initialized) return;
        this.initialized = true;
        this.sendToolData();
        return;
      case "ui/notifications/size-changed": {
        const height = Number(params.height);
        if (this.displayMode === "inline" && Number.isFinite(height) && height > 0) {
          this.frame.style.height = `${Math.min(height, MAX_APP_HEIGHT)}px`;
        }
        return;
      }
      case "ui/notifications/request-teardown":
        this.note(msg.method, "ok", "the app asked to close");
        this.teardown("the app asked to close");
        return;
      case "ping":
        answer({});
        return;
      case "ui/open-link":
        return this.openLink(params, answer, refuse);
      case "ui/message":
        return this.message(params, answer, refuse);
      case "ui/update-model-context":
        return this.updateModelContext(params, answer, refuse);
      case "ui/request-display-mode": {
        const mode = params.mode;
        if (!DISPLAY_MODES.includes(mode)) {
          refuse(-32602, `ui/request-display-mode: mode must be one of ${DISPLAY_MODES.join(", ")}`);
          return;
        }
        const declared = Array.isArray(this.appCapabilities.availableDisplayModes)
          ? this.appCapabilities.availableDisplayModes : null;
        const result = declared && !declared.includes(mode) ? this.displayMode : this.setDisplayMode(mode);
        this.note(msg.method, result === mode ? "ok" : "error", `${mode} -> ${result}`);
        answer({ mode: result });
        return;
      }
      default:
        break;
    }
    if (msg.method.startsWith("notifications/") && msg.method !== "notifications/message") return; // app-side notices
    if (!APP_SERVER_METHODS.includes(msg.method)) {
      if (isRequest) this.note(msg.method, "error", "not offered (-32601)");
      refuse(-32601, `the host does not offer ${msg.method}`);
      return;
    }
    try {
      const result = await this.proxy(msg.method, params);
      if (result && typeof result.error === "string") refuse(-32603, result.error);
      else answer(result ?? {});
    } catch (err) {
      refuse(-32603, err.message);
    }
  }

  keptCsp() {
    const csp = this.resource?.csp ?? {};
    const out = {};
    for (const key of ["connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"]) {
      const kept = (Array.isArray(csp[key]) ? csp[key] : []).filter((d) => appCSP({ [key]: [d] }).dropped.length === 0);
      if (kept.length) out[key] = kept;
    }
    return out;
  }

  async openLink(params, answer, refuse) {
    let url;
    try {
      url = new URL(String(params.url));
    } catch {
      refuse(-32602, "ui/open-link: url is not a URL");
      return;
    }
    if (!OPEN_LINK_SCHEMES.includes(url.protocol)) {
      this.note("ui/open-link", "error", `${url.protocol} refused`);
      refuse(-32000, `Policy violation: ${url.protocol} links are not opened`);
      return;
    }
    const confirm = this.options.confirmLink ?? ((href) => ask(this.card, `The app wants to open ${href}`, [["Open", true], ["Cancel", false]]));
    const yes = await confirm(url.href, this);
    this.note("ui/open-link", yes ? "ok" : "error", `${url.href} ${yes ? "opened" : "denied by the user"}`);
    if (!yes) {
      refuse(-32000, "Link opening denied by user");
      return;
    }
    window.open(url.href, "_blank", "noopener,noreferrer");
    answer({});
  }

  async message(params, answer, refuse) {
    const text = params.role === "user" ? messageText(params.content) : null;
    if (text === null) {
      refuse(-32602, "Invalid message format: role must be \"user\" and content text blocks");
      return;
    }
    const decide = this.options.message ?? ((t) => ask(this.card, `The app wants to send: ${t}`, [["Send", true], ["Discard", false]]));
    const sent = await decide(text, this);
    this.note("ui/message", sent ? "ok" : "error", sent ? "sent as a user turn" : "discarded by the user");
    if (sent) answer({});
    else refuse(-32000, "Message sending denied");
  }

  updateModelContext(params, answer, refuse) {
    const content = params.content;
    const structured = params.structuredContent;
    if ((content !== undefined && !Array.isArray(content)) ||
        (structured !== undefined && (structured === null || typeof structured !== "object" || Array.isArray(structured)))) {
      refuse(-32602, "Invalid content format: content must be a list of content blocks, structuredContent an object");
      return;
    }
    this.modelContext = { ...(content !== undefined ? { content } : {}), ...(structured !== undefined ? { structuredContent: structured } : {}) };
    this.context.textContent = `model context: ${JSON.stringify(this.modelContext)}`;
    this.note("ui/update-model-context", "ok", "kept for the next run");
    answer({});
  }
}

// The apps of a page: one per activity (or announced tool call), mounted into `root` as they arrive.
export class McpAppHost {
  constructor(root, options) {
    this.root = root;
    this.options = options;
    this.apps = new Map(); // activity messageId or tool call id -> McpApp
    this.byCall = new Map(); // tool call id -> McpApp (announced apps)
    this.lastResultCall = null; // the tool call id of the TOOL_CALL_RESULT just before
  }

  mountApp(key, content) {
    const app = new McpApp(content, { ...this.options, onClose: () => this.apps.delete(key) });
    app.card.dataset.messageId = key;
    this.apps.set(key, app);
    this.root.append(app.card);
    app.mounted = app.mount();
    return app;
  }

  // Feed every event: an announcement mounts an app at its call's start, input operations reach it,
  // an `mcp-apps` ACTIVITY_SNAPSHOT mounts (or completes) its app, a run's end cancels what is open.
  event(event) {
    if (event.type === "CUSTOM" && event.name === MCP_APP_ANNOUNCE_EVENT && event.value?.toolCallId) {
      const { toolCallId } = event.value;
      if (this.byCall.has(toolCallId)) return this.byCall.get(toolCallId);
      const app = this.mountApp(toolCallId, { ...event.value });
      this.byCall.set(toolCallId, app);
      return app;
    }
    if (event.type === "CUSTOM" && event.name === MCP_APP_INPUT_EVENT) {
      this.byCall.get(event.value?.toolCallId)?.inputOperations(event.value?.operations ?? []);
      return null;
    }
    if (event.type === "TOOL_CALL_RESULT") {
      this.lastResultCall = event.toolCallId;
      return null;
    }
    if (event.type === "RUN_ERROR" || event.type === "RUN_FINISHED") {
      const reason = event.type === "RUN_ERROR" ? `the run failed: ${event.message ?? ""}`.trim() : "the run ended without the tool's result";
      for (const app of this.byCall.values()) app.cancel(reason);
      return null;
    }
    if (event.type !== "ACTIVITY_SNAPSHOT" || event.activityType !== MCP_APPS_ACTIVITY) {
      if (event.type !== "ACTIVITY_DELTA") this.lastResultCall = null;
      return null;
    }
    const content = event.content || {};
    const announced = this.lastResultCall ? this.byCall.get(this.lastResultCall) : undefined;
    this.lastResultCall = null;
    const existing = this.apps.get(event.messageId) ?? announced;
    if (existing) {
      existing.update(content);
      this.apps.set(event.messageId, existing);
      return existing;
    }
    return this.mountApp(event.messageId, content);
  }

  // The run was stopped by the page (Drop / cancel): every app still waiting for its result hears it.
  cancelOpen(reason) {
    for (const app of this.byCall.values()) app.cancel(reason);
  }

  // The context entries of the apps' ui/update-model-context (the last one per app), for the next run.
  modelContext() {
    const out = [];
    for (const app of new Set(this.apps.values())) {
      if (!app.modelContext || app.card.dataset.state === "closed") continue;
      out.push({ description: `MCP app ${app.content.resourceUri} (${app.content.serverId ?? app.content.serverHash}): context it gave`,
                 value: JSON.stringify(app.modelContext) });
    }
    return out;
  }

  // Tear every app down (ui/resource-teardown first), then empty the panel.
  async clear(reason = "the page was cleared") {
    const apps = [...new Set(this.apps.values())];
    this.apps.clear();
    this.byCall.clear();
    await Promise.all(apps.map((app) => app.teardown(reason)));
    for (const app of apps) app.card.remove(); // apps mounted meanwhile stay
  }
}
