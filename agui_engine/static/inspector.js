// The agui-engine inspector: what a stream contains, live or recorded. Served at `<path>/inspect`.
//
// Theory of operation
// -------------------
// One ThreadStore (agui-engine.js) holds the conversation; the page keeps a timeline of rows (one per
// event, plus one per resumption after a dropped connection) and renders on the next animation frame
// after a change, so a fast stream costs one render per frame, not one per event.
//
//   * Send: POST a RunAgentInput (the thread's messages so far + the new user message) to the gateway
//     (`runSSE`: resumes with Last-Event-ID when the connection drops; "Drop connection" cancels the
//     live connection to show it).
//   * Open recording: parse the .sse / .ndjson file in the page and replay it into a fresh store.
//   * Attach: a URL whose fragment names runs (`/inspect#run=<runId>&run=...&token=<bearer>`, what
//     `agui-engine demo --inspect` prints) streams each of them from the gateway's log
//     (`GET <path>/runs/<runId>`, from its first event; live if it is still running) into the store,
//     in order, with the token in the bearer field; the fragment never reaches the server, and it is
//     taken out of the page's URL before anything is drawn (`takeFragment`).
//   * Findings: the server's Verifier annotates (POST <path>/inspect/verify with the run's events, or
//     the file's bytes): each finding is shown on the event that caused it; the applier's own findings
//     (operations that do not apply, unknown CUSTOM events) are shown the same way.
//
//   * Data: every component whose props carry `{resourceId, params}` is bound to the gateway's query
//     endpoint (`bindQuery`: queried once its params are complete, again when they change); its card
//     shows the data (WeatherCard renders the weather from it), the Queries panel every query
//     (resourceId, params, status, HTTP status, time, data or error), and its form sends one by hand.
//
// Extension points (for later features): `cardRenderers` (component name -> function(record, result)
// returning an Element, `result` the component's query result or undefined; the default renders any
// props generically) and `panels` (functions called on each render).
//
// A2UI surfaces ("a2ui-surface" activities, the official middleware's shape) are drawn in the Surfaces
// panel by inspector-a2ui.js with the official @a2ui/lit renderer (vendored), its own safe drawing when
// the renderer refuses one; a button's action starts the next run with the action in
// forwardedProps.a2uiAction.userAction (agui-engine.js's a2uiActionInput).
//
// A `render_ui` call (the component `generative-ui`) is drawn as its tree: each node by the card renderer
// registered for its component name (given {id, name, props, streamingState}) or generically, its children
// nested inside it, text as text; `data-node-id` is the node's identity. A refused tree shows its error.
//
// An `mcp-apps` ACTIVITY_SNAPSHOT (a tool with an MCP App has run) mounts the app in the Apps panel: its
// ui:// resource read through the gateway's proxy, drawn in a sandboxed iframe, its JSON-RPC bridged
// (mcp-apps.js). Apps are kept across renders (an iframe is never re-created by a render).

import {
  EventStreamParser, ThreadStore, UI_SPEC_COMPONENT, a2uiActionInput, bindQuery, parseRecording, runSSE, uiNodes,
} from "./agui-engine.js";
import { renderSurfaces, rendererReady } from "./inspector-a2ui.js";
import { McpAppHost } from "./mcp-apps.js";

// The fragment (`#run=...&token=<bearer>`) leaves the URL before anything else runs: a framed document
// (an MCP app, a renderer's frame) or a later link must never find the bearer in `location`, `baseURI`
// or a referrer. The token is kept in memory only (the bearer field's value).
const linked = takeFragment();

const $ = (id) => document.getElementById(id);
const endpoint = location.pathname.replace(/\/inspect\/?$/, "") || "/";
const base = endpoint.replace(/\/+$/, "");

export const cardRenderers = new Map();
export const panels = [];

const app = {
  store: null,
  binding: null, // the store's QueryBinding
  rows: [], // {kind: "event"|"resume", index, type, name, seq, size, time, runId, findings: []}
  byEvent: new Map(), // store event index -> row
  threadId: "inspector-" + Math.random().toString(36).slice(2, 10),
  running: false,
  reader: null,
  runId: null,
  verified: [],
  surfaceViews: new Map(), // activity message id -> SurfaceView (kept across renders)
  actions: [], // the A2UI user actions sent, in order
  cardRenderers,
  panels,
};
window.__inspector = app;
app.mcpApps = new McpAppHost($("apps"), { endpoint, headers: () => authHeaders(), message: appMessage });

// An app's ui/message: a user turn the person can send (it waits in the message box, marked as the
// app's) or discard; the app hears which (mcp-apps.js answers {} or -32000).
function appMessage(text, mcpApp) {
  app.pendingAppMessage?.resolve(false); // an older one is replaced: discarded
  return new Promise((resolve) => {
    app.pendingAppMessage = { text, resolve, from: mcpApp.content.resourceUri };
    $("message").value = text;
    $("message").dataset.fromApp = mcpApp.content.resourceUri;
    $("discard").hidden = false;
    $("message").focus();
  });
}

function settleAppMessage(sent) {
  const pending = app.pendingAppMessage;
  if (!pending) return;
  app.pendingAppMessage = null;
  delete $("message").dataset.fromApp;
  $("discard").hidden = true;
  pending.resolve(sent);
}

// ------------------------------------------------------------------------------------------ rows

function addEventRow(event, { seq = null, time = null } = {}) {
  const index = app.store.events - 1;
  app.mcpApps.event(event);
  if (event.type === "RUN_STARTED") app.runId = event.runId;
  const row = {
    kind: "event", index, type: event.type, name: event.type === "CUSTOM" ? event.name : null, seq,
    size: new TextEncoder().encode(JSON.stringify(event)).length, time, runId: app.runId, findings: [], dom: null,
  };
  app.rows.push(row);
  app.byEvent.set(index, row);
  schedule();
}

function addFinding(index, rule, message, source) {
  const row = app.byEvent.get(index) || app.byEvent.get(index - 1); // end-of-stream findings: the last event
  const finding = { index, rule, message, source };
  if (row) {
    if (row.findings.some((f) => f.rule === rule && f.message === message)) return;
    row.findings.push(finding);
    row.dom = null;
  }
  app.verified.push(finding);
  schedule();
}

let seenStoreFindings = 0;
function collectStoreFindings() {
  const findings = app.store.findings;
  for (; seenStoreFindings < findings.length; seenStoreFindings++) {
    const f = findings[seenStoreFindings];
    addFinding(f.eventIndex, f.kind, f.message, "applier");
  }
}

// ------------------------------------------------------------------------------------------ render

let pending = false;
function schedule() {
  if (!pending) {
    pending = true;
    requestAnimationFrame(render);
  }
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function rowElement(row) {
  const tr = document.createElement("tr");
  if (row.kind === "resume") {
    tr.className = "resume";
    const td = cell(row.text);
    td.colSpan = 7;
    tr.append(td);
    return tr;
  }
  tr.dataset.index = row.index;
  tr.dataset.type = row.type;
  if (row.type === "CUSTOM") tr.classList.add("custom");
  if (row.findings.length) tr.classList.add("finding");
  const type = row.name ? `CUSTOM ${row.name}` : row.type;
  const finding = row.findings.map((f) => `[${f.rule}] ${f.message}`).join("; ");
  tr.append(cell(row.index), cell(type), cell(row.seq ?? "-"), cell(row.size), cell(row.time ?? "-"),
            cell(row.runId ?? "-"), cell(finding, "finding-text"));
  return tr;
}

function renderTimeline() {
  const body = $("timeline").tBodies[0];
  app.rows.forEach((row, i) => {
    if (row.dom && row.dom.parentNode === body) return;
    const el = rowElement(row);
    const existing = body.children[i];
    if (existing) body.replaceChild(el, existing);
    else body.append(el);
    row.dom = el;
  });
  $("event-count").textContent = app.store.events;
}

// A pointer's reference token (RFC 6901): "~" -> "~0", "/" -> "~1".
function escapeToken(key) {
  return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
}

// `status` is the component's per-path status map; every member still open is marked data-status="started".
function renderValue(value, depth = 0, path = "", status = {}) {
  const span = document.createElement("div");
  span.className = "value";
  if (value !== null && typeof value === "object" && depth < 6) {
    const ul = document.createElement("ul");
    for (const [k, v] of Object.entries(value)) {
      const li = document.createElement("li");
      const sub = `${path}/${escapeToken(k)}`;
      li.dataset.status = status[sub] || "-";
      const key = document.createElement("b");
      key.textContent = `${k}: `;
      li.append(key, renderValue(v, depth + 1, sub, status));
      ul.append(li);
    }
    span.append(ul);
  } else {
    span.textContent = typeof value === "string" ? value : JSON.stringify(value);
  }
  return span;
}

// "code: message (at path)" of a query's error (the path only when the message does not end with it).
function errorText(e = {}) {
  const text = `${e.code ?? e.name}: ${e.message}`;
  return e.path && !text.includes(e.path) ? `${text} (at ${e.path})` : text;
}

function dataSection(result) {
  const section = document.createElement("div");
  section.className = "data";
  section.dataset.status = result.status;
  const head = document.createElement("div");
  head.className = "data-head";
  const badge = document.createElement("span");
  badge.className = "badge " + result.status;
  badge.textContent = result.status === "error" ? `error ${result.error?.status ?? ""}`.trim() : result.status;
  head.append(`data: ${result.resourceId} `, badge);
  if (result.ms != null) head.append(` ${result.ms} ms`);
  section.append(head);
  if (result.status === "error") {
    const err = document.createElement("div");
    err.className = "data-error";
    err.textContent = errorText(result.error);
    section.append(err);
  } else if (result.data !== undefined) {
    section.append(renderValue(result.data));
  }
  return section;
}

function genericCard(c, result) {
  const card = document.createElement("div");
  const head = document.createElement("header");
  head.textContent = c.name;
  const meta = document.createElement("span");
  meta.className = "badge " + c.streamingState;
  meta.textContent = c.streamingState;
  const id = document.createElement("small");
  id.textContent = c.id;
  head.append(meta, id);
  card.append(head);
  const message = c.streamingState === "done" ? c.completionStatusMessage || c.statusMessage : c.statusMessage;
  if (message) {
    const p = document.createElement("div");
    p.className = "status-message";
    p.textContent = message;
    card.append(p);
  }
  for (const [key, value] of Object.entries(c.props || {})) {
    const prop = document.createElement("div");
    prop.className = "prop";
    prop.dataset.prop = key;
    const k = document.createElement("span");
    k.className = "key";
    k.textContent = key;
    const statuses = c.propsStatus || {};
    const path = "/" + escapeToken(key);
    const status = statuses[path] || "-";
    prop.dataset.status = status;
    const badge = document.createElement("span");
    badge.className = "badge " + status;
    badge.textContent = status;
    prop.append(k, badge, renderValue(value, 0, path, statuses));
    card.append(prop);
  }
  if (result) card.append(dataSection(result));
  return card;
}

// The demo's WeatherCard: the model chose {resourceId: "weather.current", params: {city}}; the numbers
// come from the query's data (a card from a recording without a resourceId shows its own props). Under
// the weather view, the generic card: every prop with its status, and the query's outcome.
function weatherCard(c, result) {
  const card = genericCard(c, result);
  const props = c.props || {};
  const source = typeof props.resourceId === "string" ? (result && result.data) || {} : props;
  const view = document.createElement("div");
  view.className = "weather-view";
  const city = document.createElement("div");
  city.className = "weather-city";
  city.textContent = source.city ?? props.params?.city ?? props.city ?? "…";
  const line = document.createElement("div");
  line.className = "weather-line";
  const fields = [["temperature", (v) => `${v} °C`], ["condition", String], ["humidity", (v) => `${v} % humidity`],
                  ["wind_kph", (v) => `wind ${v} km/h`]];
  for (const [key, show] of fields) {
    if (source[key] === undefined) continue;
    const span = document.createElement("span");
    span.dataset.field = key;
    span.textContent = show(source[key]);
    line.append(span);
  }
  view.append(city, line);
  card.querySelector("header").after(view);
  return card;
}
cardRenderers.set("WeatherCard", weatherCard);

// A node of a render_ui tree is drawn by its component's card renderer, with its own query's result (a
// bound node: `binding.get(treeId, nodeId)`), exactly as a top-level component.
function renderUINode(node, treeId) {
  if (typeof node === "string") {
    const span = document.createElement("span");
    span.className = "ui-text";
    span.textContent = node;
    return span;
  }
  const state = node.done ? "done" : "streaming";
  const record = { id: node.id, name: node.component, props: node.props || {}, streamingState: state,
                   propsStatus: {} };
  const custom = cardRenderers.get(node.component);
  const result = app.binding.get(treeId, node.id);
  const el = custom ? custom(record, result) : genericCard(record, result);
  el.classList.add("ui-node");
  el.dataset.nodeId = node.id;
  el.dataset.component = node.component;
  el.dataset.done = String(Boolean(node.done));
  if (node.key !== undefined) el.dataset.key = node.key;
  if (node.fallbackFor) el.dataset.fallbackFor = node.fallbackFor;
  const children = Array.isArray(node.children) ? node.children : [];
  if (children.length) {
    const box = document.createElement("div");
    box.className = "ui-children";
    box.append(...children.map((child) => renderUINode(child, treeId)));
    el.append(box);
  }
  return el;
}

function uiTreeCard(c) {
  const card = genericCard({ ...c, props: {} });
  card.classList.add("ui-tree");
  const error = c.props && c.props.error;
  if (error) {
    const p = document.createElement("div");
    p.className = "ui-error";
    p.textContent = `refused: ${error.message}`;
    card.append(p);
  }
  card.append(...uiNodes(c).map((node) => renderUINode(node, c.id)));
  return card;
}
cardRenderers.set(UI_SPEC_COMPONENT, uiTreeCard);

function renderComponents() {
  const root = $("components");
  root.replaceChildren(...[...app.store.components.values()].map((c) => {
    const render = cardRenderers.get(c.name) || genericCard;
    const el = render(c, app.binding.get(c.id));
    el.classList.add("card");
    el.dataset.componentId = c.id;
    el.dataset.componentName = c.name;
    el.dataset.streamingState = c.streamingState;
    return el;
  }));
}

function renderMessages() {
  $("messages").replaceChildren(...app.store.messages.filter((m) => m.role !== "activity").map((m) => {
    const div = document.createElement("div");
    div.className = "message";
    div.dataset.role = m.role;
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = m.role + (m.toolCallId ? ` (${m.toolCallId})` : "");
    div.append(role, document.createTextNode(typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
    for (const call of m.toolCalls || []) {
      const t = document.createElement("div");
      t.className = "tool-call";
      const args = call.function.arguments;
      t.textContent = `→ ${call.function.name}(${args.length > 400 ? args.slice(0, 400) + "…" : args})`;
      div.append(t);
    }
    return div;
  }));
}

function renderQueries() {
  const log = app.binding.log;
  $("query-count").textContent = log.length;
  $("queries").tBodies[0].replaceChildren(...log.slice().reverse().map((q) => {
    const tr = document.createElement("tr");
    tr.dataset.seq = q.seq;
    tr.dataset.status = q.status;
    tr.dataset.resourceId = q.resourceId;
    if (q.httpStatus != null) tr.dataset.httpStatus = q.httpStatus;
    const outcome = q.status === "error" ? errorText(q.error) : q.data === undefined ? "" : JSON.stringify(q.data);
    tr.append(cell(q.seq), cell(q.componentId == null ? "(form)" : q.nodeId == null ? q.componentId : `${q.componentId} [${q.nodeId}]`), cell(q.resourceId), cell(JSON.stringify(q.params)),
              cell(q.status), cell(q.httpStatus ?? "-"), cell(q.ms == null ? "-" : `${q.ms} ms`),
              cell(outcome.length > 300 ? outcome.slice(0, 300) + "…" : outcome, "outcome"));
    for (const td of tr.children) td.title = td.textContent; // a cell cut by its column shows whole on hover
    return tr;
  }));
}

function render() {
  pending = false;
  collectStoreFindings();
  renderTimeline();
  renderSurfaces($("surfaces"), app.store, app.surfaceViews, sendAction);
  $("surface-count").textContent = app.surfaceViews.size;
  renderComponents();
  renderMessages();
  renderQueries();
  $("state").textContent = JSON.stringify(app.store.state, null, 2);
  $("finding-count").textContent = app.verified.length;
  const ordered = [...app.verified].sort((a, b) => a.index - b.index);
  $("findings").replaceChildren(...ordered.map((f) => {
    const li = document.createElement("li");
    li.dataset.index = f.index;
    li.textContent = `event ${f.index}: [${f.rule}] ${f.message}`;
    return li;
  }));
  for (const panel of panels) panel(app);
}

function setStatus(state, text) {
  $("status").dataset.state = state;
  $("status").textContent = text || state;
}

// ------------------------------------------------------------------------------------------ server findings

function authHeaders() {
  const token = $("token").value.trim();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function verify(body, offset) {
  try {
    const response = await fetch(`${base}/inspect/verify`, { method: "POST", body, headers: authHeaders() });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const result = await response.json();
    for (const f of result.findings) addFinding(offset + f.eventIndex, f.rule, f.message, "verifier");
    if (result.decodeError) addFinding(offset + (result.decodeError.frameIndex ?? 0), "decode", result.decodeError.message, "verifier");
    return result;
  } catch (err) {
    addFinding(offset, "verify", `could not ask the server for findings: ${err.message}`, "inspector");
    return null;
  }
}

// ------------------------------------------------------------------------------------------ live runs

// One received event of a live or attached run: kept raw (for the server's findings) and given its row.
function recordFrame(raw, event, eventId, time) {
  raw.push(JSON.stringify(event));
  addEventRow(event, { seq: seqOf(eventId), time });
}

// The `seq` of an event id `<runId>:<seq>` (null without an id).
function seqOf(eventId) {
  return eventId ? Number(eventId.slice(eventId.lastIndexOf(":") + 1)) : null;
}

const newId = () => Math.random().toString(36).slice(2, 12);

function send(text) {
  if (app.running) return;
  const user = { id: "u-" + newId(), role: "user", content: text };
  // the apps' ui/update-model-context (the last one of each app) reaches the model with this run
  const input = { threadId: app.threadId, runId: "run-" + newId(), messages: [...app.store.history(), user], tools: [],
                  context: app.mcpApps.modelContext(), state: app.store.state, forwardedProps: {} };
  app.store.messages.push({ ...user });
  return startRun(input);
}

// An A2UI user action (from a surface's button): the next run, with the action in its forwardedProps.
function sendAction(action) {
  if (app.running) return;
  app.actions.push(action);
  return startRun(a2uiActionInput(app.store, action, { threadId: app.threadId, runId: "run-" + newId() }));
}

async function startRun(input) {
  app.running = true;
  $("send").disabled = true;
  $("drop").disabled = false;
  const offset = app.store.events;
  const raw = [];
  const start = performance.now();
  setStatus("streaming");
  try {
    const result = await runSSE(endpoint, input, app.store, {
      headers: authHeaders(),
      onReader: (reader) => { app.reader = reader; },
      onFrame: ({ event, id: eventId }) => recordFrame(raw, event, eventId, `${Math.round(performance.now() - start)} ms`),
      onResume: ({ lastEventId, attempt }) => {
        setStatus("resuming", `resuming (${attempt})`);
        app.rows.push({ kind: "resume", text: `connection dropped; resumed with Last-Event-ID ${lastEventId}`,
                        lastEventId, dom: null });
        schedule();
      },
    });
    setStatus(result.terminal ? "done" : "error", result.terminal ? `done (${result.resumes} resumed)` : "stream ended early");
  } catch (err) {
    setStatus("error", `error: ${err.message}`);
  } finally {
    app.running = false;
    app.reader = null;
    $("send").disabled = false;
    $("drop").disabled = true;
  }
  await verify(raw.join("\n") + "\n", offset);
}

// ------------------------------------------------------------------------------------------ recordings

// A fresh store (the page's, or a recording's), bound to the gateway's query endpoint.
function useStore(store) {
  app.binding?.stop();
  app.store = store;
  app.surfaceViews = new Map();
  app.binding = bindQuery(store, { url: endpoint, headers: authHeaders });
  app.binding.subscribe(() => schedule());
  store.subscribe(() => schedule());
}

async function replay(file) {
  const text = await file.text();
  useStore(new ThreadStore());
  app.rows = [];
  app.byEvent = new Map();
  app.verified = [];
  app.runId = null;
  app.mcpApps.clear();
  seenStoreFindings = 0;
  $("timeline").tBodies[0].replaceChildren();
  setStatus("streaming", `replaying ${file.name}`);
  const { events, errors } = parseRecording(text);
  let first = null;
  for (let i = 0; i < events.length; i++) {
    const event = events[i];
    app.store.apply(event);
    const ts = typeof event.timestamp === "number" ? event.timestamp : null;
    if (first === null && ts !== null) first = ts;
    addEventRow(event, { seq: seqOf(event.__id), time: ts !== null ? `${ts - first} ms` : null });
    if (i % 25 === 24) await new Promise((resolve) => requestAnimationFrame(resolve));
  }
  for (const e of errors) addFinding(e.index, "parse", `frame ${e.index} is not an event: ${e.message}`, "inspector");
  await verify(text, 0);
  setStatus("done", `replayed ${file.name}: ${events.length} events`);
}

// ------------------------------------------------------------------------------------------ attach

// The runs the page's fragment names, and the bearer token it carries: `#run=a&run=b&token=t`; the
// fragment is taken out of the URL (history.replaceState: the entry itself is rewritten, so neither
// the address bar, nor Back, nor a document's base URL keeps it).
function takeFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (location.hash) history.replaceState(history.state, "", location.pathname + location.search);
  return { runIds: params.getAll("run").filter(Boolean), token: params.get("token") };
}

// Stream each named run from the gateway's log into the store, in order (GET <path>/runs/<runId>:
// the whole log from its first event, then live until its terminal event), then ask for findings.
async function attach(runIds) {
  app.running = true;
  $("send").disabled = true;
  try {
    for (const runId of runIds) {
      setStatus("streaming", `attaching ${runId}`);
      const offset = app.store.events;
      const raw = [];
      const start = performance.now();
      const response = await fetch(`${base}/runs/${encodeURIComponent(runId)}`, {
        headers: { ...authHeaders(), Accept: "text/event-stream" },
      });
      if (!response.ok) {
        let detail = "";
        try { detail = (await response.json()).error?.message ?? ""; } catch { /* not JSON */ }
        setStatus("error", `cannot attach ${runId}: HTTP ${response.status} ${detail}`.trim());
        return;
      }
      const parser = new EventStreamParser("sse");
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        const events = done ? parser.close() : parser.feed(decoder.decode(value, { stream: true }));
        for (const event of events) {
          app.store.apply(event);
          recordFrame(raw, event, event.__id, `${Math.round(performance.now() - start)} ms`);
        }
        if (done) break;
      }
      await verify(raw.join("\n") + "\n", offset);
    }
    setStatus("done", `attached ${runIds.join(", ")}`);
  } catch (err) {
    setStatus("error", `error: ${err.message}`);
  } finally {
    app.running = false;
    $("send").disabled = false;
  }
}

// ------------------------------------------------------------------------------------------ wiring

$("send-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("message").value.trim();
  if (text && !app.running) {
    $("message").value = "";
    settleAppMessage(true);
    send(text);
  }
});
$("discard").addEventListener("click", () => {
  $("message").value = "";
  settleAppMessage(false);
});
$("recording").addEventListener("change", () => {
  const file = $("recording").files[0];
  if (file) replay(file);
});
$("drop").addEventListener("click", () => {
  if (app.reader) app.reader.cancel().catch(() => {});
});
$("query-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const resourceId = $("query-resource").value.trim();
  let params;
  try {
    params = JSON.parse($("query-params").value.trim() || "{}");
  } catch (err) {
    $("query-problem").textContent = `params are not JSON: ${err.message}`;
    return;
  }
  $("query-problem").textContent = "";
  app.binding.query(resourceId, params).catch((err) => { $("query-problem").textContent = err.message; });
});
useStore(new ThreadStore());
// surfaces drawn before the renderer loaded (the fallback) are drawn again with it
rendererReady.then(() => {
  for (const view of app.surfaceViews.values()) view.version = -1;
  schedule();
});
if (linked.token) $("token").value = linked.token;
app.ready = true;
render();
if (linked.runIds.length) app.attached = attach(linked.runIds);
