// agui-engine.js -- the browser / Node half of agui-engine's generative UI. A dependency-free ES module.
//
// Served by the SSE gateway at `<path>/static/agui-engine.js` and shipped in the Python package
// (agui_engine/static/). No build step: import it as is.
//
// Theory of operation
// -------------------
// A `ThreadStore` folds AG-UI events (plain objects, camelCase, as they arrive on the wire or from an
// `@ag-ui/client` agent) into what a front end renders:
//
//   * components: one record per `tambo.component.start`, keyed by componentId:
//     {id, name, messageId, toolCallId, props, state, propsStatus, streamingState, statusMessage,
//      completionStatusMessage, finalProps, version}. `props_delta` / `state_delta` operations are
//     applied in place (RFC 6902 plus the engine's string `append`, spec/components.md); `end`
//     sets finalProps (and props to it when the deltas disagree: a finding). `propsStatus` is the
//     status of every path of the props ({pointer: "started" | "done"}), rebuilt from each delta's
//     operations and `statusChanges` (only what changed and the operations do not imply travels);
//     `end` marks whatever is left done.
//   * messages (text, tool calls with their arguments, tool results), state (STATE_SNAPSHOT and
//     STATE_DELTA applied), runs (id, status, pending client tool calls, interrupts).
//   * findings: everything that could not be applied, with the index of the event that caused it.
//
// Never throws for remote input: an unknown CUSTOM event, an operation that does not apply, a delta
// for an unknown component each become a finding, and the component keeps its last good props (the
// operations of one event are applied all-or-nothing: a failing event is rolled back).
//
// Cost: each operation is O(depth of its path); an `append` is a string concatenation (V8 keeps it as
// a rope), so a long streamed string costs O(new characters) per event, never the whole string.
//
// Subscribe: `store.subscribe(listener)` calls `listener(store, event)` after every event; returns an
// unsubscribe function. React: `useSyncExternalStore(store.subscribe, () => store.version)`; each
// component record gets a new object (with a higher `version`) whenever it changes, so
// `store.components.get(id)` works as a memo key.
//
// Inputs: `connectAgent(agent, store)` subscribes the store to an `@ag-ui/client` agent; `store.apply`
// takes one event; `EventStreamParser` turns SSE or NDJSON text into events (raw streams, recorded
// files); `runSSE(url, input, store)` POSTs a RunAgentInput to an agui-engine gateway and follows the
// stream, resuming with Last-Event-ID after a dropped connection. `restoreThread(url, threadId, options)`
// (also `ThreadStore.restore`) rebuilds a store from the gateway's kept history of a thread
// (`GET <url>/threads/<threadId>`, spec/transports.md §4.4): after a reload, the conversation is back.
//
// Data binding (spec/components.md, "Data binding"): a component the model chose gets business
// meaning in its props, `{resourceId, params, ...}`, never a URL. `query(resourceId, params, options)`
// POSTs `{resourceId, params}` to the gateway's one fixed proxy, `<path>/data/query` (the same
// Authorization header as runs), and resolves to the resolver's data or rejects with a `QueryError`
// ({status, code, message, path, retryAfter}). `bindQuery(store, options)` keeps one query per
// component whose props carry a resourceId: it queries once the resourceId and params are complete
// (their `propsStatus` is `done`, or the component ended), again only when the canonical
// `resourceId + params` change (so deltas of other props never query), after `debounceMs`; an older
// query is aborted and its answer, should it still arrive, never overwrites a newer one (each query
// has a sequence number). A `render_ui` tree's nodes bind the same way, one query per node whose props
// carry a resourceId, once the node is `done`. `binding.get(componentId, nodeId?)` is the result,
// `binding.log` every query made.
//
// Activities (ACTIVITY_SNAPSHOT / ACTIVITY_DELTA) are messages of role "activity" in `store.messages`
// and `store.activities` (by id), applied as @ag-ui/client applies them; `store.history()` is the
// conversation without them (what goes back to the agent). A2UI surfaces (activity type
// "a2ui-surface", the official middleware's shape) are read with `a2uiContent(record)`, and a user
// action on one goes back with `sendA2UIAction(url, store, action)` (section "A2UI" below).
//
// A2UI resource-bound data (spec/a2ui.md): a surface's data member may be `{"$resource": {resourceId,
// params}}`; `a2uiData(operations, options)` queries each binding through the same `query()` and
// resolves to the surface's data model with the answers at their paths.
//
// Extension points: `ThreadStore.customHandlers` (name -> function(store, event, index)), for
// features added later (UI specs) without editing the core.

/** The AG-UI version this client speaks, sent as RunAgentInput.protocolVersion (spec/wire-versions.md). */
export const PROTOCOL_VERSION = "1.0";
export const COMPONENT_START = "tambo.component.start";
export const COMPONENT_PROPS_DELTA = "tambo.component.props_delta";
export const COMPONENT_STATE_DELTA = "tambo.component.state_delta";
export const COMPONENT_END = "tambo.component.end";
export const TOOL_CALL_STATUS = "agui_engine.tool_call.status";
export const HISTORY_TRIMMED_EVENT = "agui_engine.history_trimmed";
// The component a `render_ui` call streams as (spec/components.md, "The UI spec as a tool"): its props are the
// tree document {root: [node | text], error?}, node = {id, component, props, children, done, key?, fallbackFor?}.
// `id` is the node's identity (its index path, fixed when it first appears): key a rendered node by it.
export const UI_SPEC_COMPONENT = "generative-ui";

/** The nodes of a `render_ui` component record (its tree document's root), or [] for any other record. */
export function uiNodes(record) {
  if (!record || record.name !== UI_SPEC_COMPONENT || !isObject(record.props)) return [];
  return Array.isArray(record.props.root) ? record.props.root : [];
}

// ------------------------------------------------------------------------------------------ JSON Patch

export class PatchError extends Error {
  constructor(message, index) {
    super(message);
    this.name = "PatchError";
    this.opIndex = index;
  }
}

function unescapeToken(token) {
  return token.indexOf("~") === -1 ? token : token.replace(/~1/g, "/").replace(/~0/g, "~");
}

function parsePointer(path) {
  if (typeof path !== "string") throw new Error(`path must be a string, got ${typeof path}`);
  if (path === "") return [];
  if (path[0] !== "/") throw new Error(`not a JSON pointer: ${JSON.stringify(path)}`);
  return path.slice(1).split("/").map(unescapeToken);
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function walk(doc, tokens, path) {
  let node = doc;
  for (let i = 0; i < tokens.length - 1; i++) {
    const token = tokens[i];
    if (Array.isArray(node)) {
      const index = arrayIndex(token, node.length - 1, path);
      node = node[index];
    } else if (isObject(node) && Object.prototype.hasOwnProperty.call(node, token)) {
      node = node[token];
    } else {
      throw new Error(`${path}: ${JSON.stringify(token)} does not exist`);
    }
  }
  if (!Array.isArray(node) && !isObject(node)) throw new Error(`${path}: parent is not a container`);
  return node;
}

function arrayIndex(token, max, path) {
  if (!/^(0|[1-9][0-9]*)$/.test(token)) throw new Error(`${path}: ${JSON.stringify(token)} is not an array index`);
  const index = Number(token);
  if (index > max) throw new Error(`${path}: index ${index} out of range`);
  return index;
}

function getAt(doc, path) {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return doc;
  const parent = walk(doc, tokens, path);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) return parent[arrayIndex(last, parent.length - 1, path)];
  if (!Object.prototype.hasOwnProperty.call(parent, last)) throw new Error(`${path} does not exist`);
  return parent[last];
}

function clone(value) {
  return value === null || typeof value !== "object" ? value : JSON.parse(JSON.stringify(value));
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, k) || !deepEqual(a[k], b[k])) return false;
  }
  return true;
}

// One operation, in place. Returns [newDoc, undo]: undo() restores what the op changed.
function applyOne(doc, op) {
  if (!isObject(op)) throw new Error("operation is not an object");
  const kind = op.op;
  const path = op.path;
  const tokens = parsePointer(path);
  const needsValue = kind === "add" || kind === "replace" || kind === "test" || kind === "append";
  if (needsValue && !Object.prototype.hasOwnProperty.call(op, "value")) throw new Error(`${kind} ${path}: no value`);
  if (kind === "move" || kind === "copy") {
    const value = getAt(doc, op.from);
    if (kind === "move" && (path === op.from || path.startsWith(op.from + "/"))) {
      throw new Error(`move ${op.from} -> ${path}: into itself`);
    }
    let undoRemove = () => {};
    let current = doc;
    if (kind === "move") [current, undoRemove] = applyOne(doc, { op: "remove", path: op.from });
    const [next, undoAdd] = applyOne(current, { op: "add", path, value: kind === "copy" ? clone(value) : value });
    return [next, () => { undoAdd(); undoRemove(); }];
  }
  if (tokens.length === 0) {
    if (kind === "add" || kind === "replace") return [op.value, () => {}];
    if (kind === "test") {
      if (!deepEqual(doc, op.value)) throw new Error("test failed at the root");
      return [doc, () => {}];
    }
    throw new Error(`${kind} on the document root`);
  }
  const parent = walk(doc, tokens, path);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    if (kind === "add") {
      const index = last === "-" ? parent.length : arrayIndex(last, parent.length, path);
      parent.splice(index, 0, op.value);
      return [doc, () => parent.splice(index, 1)];
    }
    const index = arrayIndex(last, parent.length - 1, path);
    const old = parent[index];
    if (kind === "remove") {
      parent.splice(index, 1);
      return [doc, () => parent.splice(index, 0, old)];
    }
    if (kind === "replace") {
      parent[index] = op.value;
      return [doc, () => { parent[index] = old; }];
    }
    if (kind === "append") {
      if (typeof old !== "string" || typeof op.value !== "string") throw new Error(`append ${path}: not a string`);
      parent[index] = old + op.value;
      return [doc, () => { parent[index] = old; }];
    }
    if (kind === "test") {
      if (!deepEqual(old, op.value)) throw new Error(`test failed at ${path}`);
      return [doc, () => {}];
    }
    throw new Error(`unknown op ${JSON.stringify(kind)}`);
  }
  const had = Object.prototype.hasOwnProperty.call(parent, last);
  const old = parent[last];
  const restore = had ? () => { parent[last] = old; } : () => { delete parent[last]; };
  switch (kind) {
    case "add":
      parent[last] = op.value;
      return [doc, restore];
    case "replace":
      if (!had) throw new Error(`replace ${path}: does not exist`);
      parent[last] = op.value;
      return [doc, restore];
    case "remove":
      if (!had) throw new Error(`remove ${path}: does not exist`);
      delete parent[last];
      return [doc, restore];
    case "append":
      if (!had) throw new Error(`append ${path}: does not exist`);
      if (typeof old !== "string" || typeof op.value !== "string") throw new Error(`append ${path}: not a string`);
      parent[last] = old + op.value;
      return [doc, restore];
    case "test":
      if (!had || !deepEqual(old, op.value)) throw new Error(`test failed at ${path}`);
      return [doc, () => {}];
    default:
      throw new Error(`unknown op ${JSON.stringify(kind)}`);
  }
}

/**
 * Apply JSON Patch operations (RFC 6902 and the engine's string `append`) to `doc` in place,
 * all or nothing. Returns the new document (a new value only when an op replaced the root).
 * Throws PatchError (with `opIndex`) and leaves `doc` exactly as it was when one does not apply.
 */
export function applyOperations(doc, ops) {
  if (!Array.isArray(ops)) throw new PatchError("operations must be a list", -1);
  const undo = [];
  let current = doc;
  for (let i = 0; i < ops.length; i++) {
    try {
      const [next, back] = applyOne(current, ops[i]);
      current = next;
      undo.push(back);
    } catch (err) {
      for (let j = undo.length - 1; j >= 0; j--) undo[j]();
      throw new PatchError(`operation ${i}: ${err.message}`, i);
    }
  }
  return current;
}

// ------------------------------------------------------------------------------------------ per-path status

/** Key of a props delta's per-path status changes (spec/components.md, "Status"). */
export const STATUS_CHANGES = "statusChanges";

/** {pointer: "done"} for every path inside `value` (the root excluded): the map of an ended call. */
export function doneStatuses(value) {
  const out = {};
  const todo = [["", value]];
  while (todo.length) {
    const [base, node] = todo.pop();
    if (!isObject(node) && !Array.isArray(node)) continue;
    for (const [key, child] of Object.entries(node)) {
      const path = `${base}/${String(key).replace(/~/g, "~0").replace(/\//g, "~1")}`;
      out[path] = "done";
      if (isObject(child) || Array.isArray(child)) todo.push([path, child]);
    }
  }
  return out;
}

/** The status an `add` / `replace` of `value` gives its path, unsent (spec/components.md, "Status"). */
export function impliedStatus(value) {
  const empty = (Array.isArray(value) && value.length === 0) || (isObject(value) && Object.keys(value).length === 0);
  return typeof value === "string" || empty ? "started" : "done";
}

/**
 * The [path, status] each `add` / `replace` of a props delta implies, in order. Take them before
 * applying the operations: applying puts an op's `{}` or `[]` into the props, and the ops after it
 * fill that very object in.
 */
export function impliedStatuses(ops) {
  const out = [];
  if (Array.isArray(ops)) {
    for (const op of ops) {
      if (isObject(op) && (op.op === "add" || op.op === "replace") && typeof op.path === "string" && op.path) {
        out.push([op.path, impliedStatus(op.value)]);
      }
    }
  }
  return out;
}

/**
 * Rebuild the per-path status map `status` ({pointer: "started" | "done"}) in place from one props
 * delta whose operations just applied: first each [path, status] of `implied` (`impliedStatuses` of
 * the operations, taken before they applied), then `changes` (the delta's `statusChanges`, may be
 * undefined) on top: null removes the path, the others set it. Throws, leaving `status` as it was,
 * when `changes` is not an object of JSON pointers to "started" | "done" | null.
 */
export function applyStatusChanges(status, implied, changes) {
  const entries = changes === undefined ? [] : isObject(changes) ? Object.entries(changes) : null;
  if (entries === null) throw new Error(`${STATUS_CHANGES} must be an object`);
  for (const [path, value] of entries) {
    if (path[0] !== "/" || !(value === "started" || value === "done" || value === null)) {
      throw new Error(`${STATUS_CHANGES}[${JSON.stringify(path)}]: expected a JSON pointer -> ` +
                      `"started" | "done" | null, got ${JSON.stringify(value)}`);
    }
  }
  for (const [path, value] of implied) status[path] = value;
  for (const [path, value] of entries) {
    if (value === null) delete status[path];
    else status[path] = value;
  }
  return status;
}

// ------------------------------------------------------------------------------------------ wire parsing

/**
 * SSE or NDJSON text in, AG-UI events out: `feed(text) -> events`, `close() -> events`.
 * SSE: every `data:` block is one event (multi-line data joined with "\n"), `id:` sets `lastEventId`,
 * comments and unknown fields are skipped. `format` is "sse", "ndjson" or "auto" (decided by the first
 * non-blank character: `{` is NDJSON). A frame that is not JSON becomes an entry in `errors`
 * ({index, message, text}), never an exception.
 */
export class EventStreamParser {
  constructor(format = "auto") {
    this.format = format;
    this.buffer = "";
    this.lastEventId = null;
    this.errors = [];
    this.frames = 0;
    this._data = null;
    this._id = null;
  }

  feed(text) {
    this.buffer += text;
    const out = [];
    let start = 0;
    for (;;) {
      const nl = this.buffer.indexOf("\n", start);
      if (nl === -1) break;
      let line = this.buffer.slice(start, nl);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      start = nl + 1;
      this._line(line, out);
    }
    this.buffer = this.buffer.slice(start);
    return out;
  }

  close() {
    const out = [];
    if (this.buffer) {
      const rest = this.buffer;
      this.buffer = "";
      this._line(rest, out);
    }
    if (this.format === "sse") this._line("", out);
    return out;
  }

  _line(line, out) {
    if (this.format === "auto") {
      if (line.trim() === "") return;
      this.format = line.trimStart().startsWith("{") ? "ndjson" : "sse";
    }
    if (this.format === "ndjson") {
      if (line.trim() !== "") this._emit(line, out, null);
      return;
    }
    if (line === "") {
      if (this._data !== null) this._emit(this._data, out, this._id);
      this._data = null;
      return;
    }
    if (line[0] === ":") return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value[0] === " ") value = value.slice(1);
    if (field === "data") this._data = this._data === null ? value : this._data + "\n" + value;
    else if (field === "id" && value.indexOf("\0") === -1) {
      this.lastEventId = value;
      this._id = value;
    }
  }

  _emit(text, out, id) {
    const index = this.frames++;
    try {
      const event = JSON.parse(text);
      if (!isObject(event) || typeof event.type !== "string") throw new Error("not an AG-UI event (no type)");
      if (id !== null) Object.defineProperty(event, "__id", { value: id, enumerable: false });
      out.push(event);
    } catch (err) {
      this.errors.push({ index, message: err.message, text: text.slice(0, 200) });
    }
  }
}

/** Parse a whole recorded stream (an .sse or .ndjson file's text). Returns {events, errors}. */
export function parseRecording(text) {
  const parser = new EventStreamParser("auto");
  const events = parser.feed(text);
  events.push(...parser.close());
  return { events, errors: parser.errors };
}

// ------------------------------------------------------------------------------------------ the store

/** `@ag-ui/client` spells some types in camelCase on its objects; the wire uses UPPER_SNAKE. */
function typeOf(event) {
  return typeof event?.type === "string" ? event.type : "";
}

export class ThreadStore {
  constructor() {
    this.components = new Map();
    this.activities = new Map();
    this.messages = [];
    this.state = {};
    this.runs = [];
    this.findings = [];
    this.events = 0;
    this.version = 0;
    this.customHandlers = new Map([
      [COMPONENT_START, (s, e, i) => s._componentStart(e, i)],
      [COMPONENT_PROPS_DELTA, (s, e, i) => s._componentDelta(e, i, "props")],
      [COMPONENT_STATE_DELTA, (s, e, i) => s._componentDelta(e, i, "state")],
      [COMPONENT_END, (s, e, i) => s._componentEnd(e, i)],
      [TOOL_CALL_STATUS, (s, e, i) => s._toolCallStatus(e, i)],
      // a run a gateway's history could not keep whole (spec/transports.md §4.4): noted, not a finding
      [HISTORY_TRIMMED_EVENT, (s, e) => s.historyTrimmed.push(e.value)],
    ]);
    this.historyTrimmed = [];
    this._listeners = new Set();
    this._byId = new Map();
    this._toolCalls = new Map();
    this._lastToolCall = null;
    this.subscribe = this.subscribe.bind(this);
  }

  /** `listener(store, event)` after every event; returns the unsubscribe function. */
  subscribe(listener) {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /** Fold one event in. Never throws for bad input: it becomes a finding. */
  apply(event) {
    const index = this.events++;
    try {
      this._apply(event, index);
    } catch (err) {
      this._finding(index, event, "internal", `could not apply: ${err && err.message}`);
    }
    this.version++;
    for (const listener of this._listeners) {
      try {
        listener(this, event);
      } catch (err) {
        // a listener's bug must not stop the stream; it is reported once per event
        this._finding(index, event, "listener", `a subscriber threw: ${err && err.message}`);
      }
    }
  }

  applyAll(events) {
    for (const event of events) this.apply(event);
  }

  /** Plain data: {componentId: props} (what tests and the inspector compare). */
  propsById() {
    const out = {};
    for (const [id, c] of this.components) out[id] = c.props;
    return out;
  }

  _finding(index, event, kind, message) {
    this.findings.push({ eventIndex: index, eventType: typeOf(event), kind, message });
  }

  _apply(event, index) {
    switch (typeOf(event)) {
      case "RUN_STARTED":
        this.runs.push({ threadId: event.threadId, runId: event.runId, status: "running", pendingToolCallIds: [],
                         interrupts: [], ...(event.parentRunId ? { parentRunId: event.parentRunId } : {}) });
        // as @ag-ui/client: the run's input messages the thread does not hold yet join it (a restored history)
        this._addMissing(event.input?.messages);
        break;
      case "RUN_FINISHED": {
        const run = this._run();
        run.status = "finished";
        run.result = event.result;
        const outcome = event.outcome;
        if (outcome && outcome.type === "interrupt") run.interrupts = outcome.interrupts || [];
        if (outcome && Array.isArray(outcome.pendingToolCallIds)) run.pendingToolCallIds = outcome.pendingToolCallIds;
        break;
      }
      case "RUN_ERROR": {
        const run = this._run();
        run.status = "error";
        run.error = { message: event.message, code: event.code };
        break;
      }
      case "TEXT_MESSAGE_START":
        this._message(event.messageId, event.role || "assistant");
        break;
      case "TEXT_MESSAGE_CONTENT": {
        const m = this._byId.get(event.messageId);
        if (!m) this._finding(index, event, "unknown_message", `no message ${event.messageId}`);
        else m.content = (m.content || "") + (event.delta || "");
        break;
      }
      case "TOOL_CALL_START": {
        const parent = event.parentMessageId ? this._message(event.parentMessageId, "assistant") : null;
        const call = { id: event.toolCallId, type: "function", function: { name: event.toolCallName, arguments: "" } };
        if (parent) (parent.toolCalls ||= []).push(call);
        this._toolCalls.set(event.toolCallId, call);
        this._lastToolCall = event.toolCallId;
        break;
      }
      case "TOOL_CALL_ARGS": {
        const call = this._toolCalls.get(event.toolCallId);
        if (!call) this._finding(index, event, "unknown_tool_call", `no tool call ${event.toolCallId}`);
        else call.function.arguments += event.delta || "";
        break;
      }
      case "TOOL_CALL_RESULT":
        this.messages.push({ id: event.messageId, role: "tool", toolCallId: event.toolCallId, content: event.content });
        this._byId.set(event.messageId, this.messages[this.messages.length - 1]);
        break;
      case "STATE_SNAPSHOT":
        this.state = clone(event.snapshot);
        break;
      case "STATE_DELTA":
        try {
          this.state = applyOperations(this.state, event.delta);
        } catch (err) {
          this._finding(index, event, "state_patch", err.message);
        }
        break;
      case "ACTIVITY_SNAPSHOT":
        this._activitySnapshot(event, index);
        break;
      case "ACTIVITY_DELTA":
        this._activityDelta(event, index);
        break;
      case "MESSAGES_SNAPSHOT":
        this._addMissing(event.messages);
        break;
      case "CUSTOM": {
        const handler = this.customHandlers.get(event.name);
        if (handler) handler(this, event, index);
        else this._finding(index, event, "unknown_custom", `unknown CUSTOM event ${JSON.stringify(event.name)} (ignored)`);
        break;
      }
      default:
        break;
    }
  }

  // An activity is a message of role "activity" (as @ag-ui/client keeps it), in `messages` in arrival
  // order and in `activities` by id. A snapshot creates it, or replaces its content unless
  // `replace: false`; each change is a new object with a higher `version` (a memo key, like components).
  _activitySnapshot(event, index) {
    if (typeof event.messageId !== "string" || !isObject(event.content)) {
      this._finding(index, event, "activity", "ACTIVITY_SNAPSHOT needs a string messageId and an object content");
      return;
    }
    const existing = this._byId.get(event.messageId);
    if (existing && event.replace === false) return; // kept, activity or not (as @ag-ui/client)
    const record = { id: event.messageId, role: "activity", activityType: event.activityType, content: clone(event.content),
                     version: this.version + 1 };
    this._setActivity(record, existing);
  }

  _activityDelta(event, index) {
    const existing = this.activities.get(event.messageId);
    if (!existing) {
      this._finding(index, event, "activity", `ACTIVITY_DELTA for unknown activity ${event.messageId} (ignored)`);
      return;
    }
    try {
      const content = applyOperations(clone(existing.content), event.patch);
      this._setActivity({ ...existing, activityType: event.activityType ?? existing.activityType, content,
                          version: this.version + 1 }, existing);
    } catch (err) {
      this._finding(index, event, "activity_patch",
                    `patch for activity ${event.messageId} did not apply: ${err.message} (last good content kept)`);
    }
  }

  _setActivity(record, existing) {
    const at = existing ? this.messages.indexOf(existing) : -1;
    if (at >= 0) this.messages[at] = record;
    else this.messages.push(record);
    this._byId.set(record.id, record);
    this.activities.set(record.id, record);
  }

  /**
   * The conversation as a RunAgentInput's `messages`: every message but the activities (which, as
   * @ag-ui/client does, never go back to the agent), tool calls and tool results kept.
   */
  history() {
    return this.messages.filter((m) => m.role !== "activity").map((m) => {
      const out = { id: m.id, role: m.role };
      if (m.role === "tool") return { ...out, toolCallId: m.toolCallId, content: m.content ?? "" };
      if (m.content) out.content = m.content;
      if (m.toolCalls && m.toolCalls.length) out.toolCalls = m.toolCalls;
      if (m.role === "user" && out.content === undefined) out.content = "";
      return out;
    });
  }

  _run() {
    if (!this.runs.length || this.runs[this.runs.length - 1].status !== "running") {
      this.runs.push({ threadId: null, runId: null, status: "running", pendingToolCallIds: [], interrupts: [] });
    }
    return this.runs[this.runs.length - 1];
  }

  _addMissing(messages) {
    for (const m of messages || []) {
      if (!this._byId.has(m.id)) {
        const copy = clone(m);
        this.messages.push(copy);
        this._byId.set(copy.id, copy);
      }
    }
  }

  _message(id, role) {
    let m = this._byId.get(id);
    if (!m) {
      m = { id, role, content: "" };
      this.messages.push(m);
      this._byId.set(id, m);
    }
    return m;
  }

  _value(event, index, ...keys) {
    const value = event.value;
    if (!isObject(value)) {
      this._finding(index, event, "component", `CUSTOM ${event.name}: value must be an object`);
      return null;
    }
    for (const key of keys) {
      if (typeof value[key] !== "string") {
        this._finding(index, event, "component", `CUSTOM ${event.name}: value.${key} must be a string`);
        return null;
      }
    }
    return value;
  }

  _set(record) {
    record.version = this.version + 1;
    this.components.set(record.id, record);
  }

  _componentStart(event, index) {
    const value = this._value(event, index, "messageId", "componentId", "componentName");
    if (!value) return;
    if (this.components.has(value.componentId)) {
      this._finding(index, event, "component", `component ${value.componentId} already started`);
      return;
    }
    const status = this._statusOf(this._lastToolCall);
    this._set({
      id: value.componentId, name: value.componentName, messageId: value.messageId, toolCallId: this._lastToolCall,
      props: {}, state: undefined, propsStatus: {}, streamingState: "started", finalProps: undefined,
      statusMessage: status.statusMessage, completionStatusMessage: status.completionStatusMessage, version: 0,
    });
    const m = this._message(value.messageId, "assistant");
    (m.components ||= []).push(value.componentId);
  }

  // The value and the known component an update event is about, or null (a finding recorded).
  _target(event, index) {
    const value = this._value(event, index, "componentId");
    if (!value) return null;
    const c = this.components.get(value.componentId);
    if (!c) {
      this._finding(index, event, "component", `unknown component ${value.componentId} (no start event)`);
      return null;
    }
    return [value, c];
  }

  _componentDelta(event, index, member) {
    const found = this._target(event, index);
    if (!found) return;
    const [value, c] = found;
    const record = { ...c, streamingState: "streaming" };
    const implied = member === "props" && c.propsStatus ? impliedStatuses(value.operations) : null;
    try {
      const target = isObject(c[member]) || Array.isArray(c[member]) ? c[member] : {};
      record[member] = applyOperations(target, value.operations);
      // the status follows the props: applied only when the event's operations were
      if (implied) {
        try {
          record.propsStatus = applyStatusChanges(c.propsStatus, implied, value[STATUS_CHANGES]);
        } catch (err) {
          this._finding(index, event, "component", `component ${c.id}: ${err.message}`);
        }
      }
    } catch (err) {
      // all or nothing: the props are exactly the last good ones
      this._finding(index, event, "component_patch",
                    `operations for component ${c.id} did not apply: ${err.message} (last good ${member} kept)`);
    }
    this._set(record);
  }

  _componentEnd(event, index) {
    const found = this._target(event, index);
    if (!found) return;
    const [value, c] = found;
    const record = { ...c, streamingState: "done" };
    for (const [key, member] of [["finalProps", "props"], ["finalState", "state"]]) {
      const final = value[key];
      if (isObject(final)) {
        if (member === "props") record.finalProps = clone(final);
        if (!deepEqual(final, c[member])) {
          record[member] = clone(final);
          this._finding(index, event, "component_final_mismatch",
                        `component ${c.id}: ${member} built from the deltas differ from ${key}; ${key} kept`);
        }
      }
    }
    // The end of the call: every path of the final props is done (whatever was still open, and
    // nothing an interactable update replaced or a repair removed is left behind).
    if (c.propsStatus) record.propsStatus = doneStatuses(record.props);
    this._set(record);
  }

  _statusOf(toolCallId) {
    return (this._status && this._status.get(toolCallId)) || {};
  }

  _toolCallStatus(event, index) {
    const value = this._value(event, index, "toolCallId");
    if (!value) return;
    (this._status ||= new Map()).set(value.toolCallId, {
      statusMessage: value.statusMessage, completionStatusMessage: value.completionStatusMessage,
    });
    for (const c of this.components.values()) {
      if (c.toolCallId === value.toolCallId) {
        this._set({ ...c, statusMessage: value.statusMessage, completionStatusMessage: value.completionStatusMessage });
      }
    }
  }
}

// ------------------------------------------------------------------------------------------ inputs

/** Subscribe `store` to an `@ag-ui/client` agent's events; returns the unsubscribe function. */
/** What `restoreThread` rejects with: the gateway's status and error code (404 `unknown_thread`). */
export class HistoryError extends Error {
  constructor(message, { status = 0, code = "history_failed" } = {}) {
    super(message);
    this.name = "HistoryError";
    this.status = status;
    this.code = code;
  }
}

/** The response headers of a thread history: the branch's last run, and whether runs of it are gone. */
export const HISTORY_TRIMMED_HEADER = "X-AGUI-History-Trimmed";

/** The HistoryError of a refused thread request: the gateway's JSON error, else the status. */
async function refusal(response, fallbackCode) {
  let code = fallbackCode;
  let message = `HTTP ${response.status}`;
  try {
    const body = await response.json();
    code = body?.error?.code ?? code;
    message = body?.error?.message ?? message;
  } catch {
    // not our gateway's JSON error: the status says it
  }
  return new HistoryError(message, { status: response.status, code });
}

/**
 * Rebuild a thread from the gateway's history: `GET <url>/threads/<threadId>` (the branch ending at
 * `options.runId`, default the thread's latest run), applied to `options.store` (a new ThreadStore by
 * default). `options.runKey`: a run key of one of the thread's runs (what runSSE resolved with), for a
 * gateway without per-client tokens; `options.headers` (e.g. Authorization). Resolves to
 * {store, events, runId, trimmed}: `runId` is the branch's last run (name it as the next run's
 * parentRunId to continue this branch), `trimmed` is true when older runs of the branch were evicted.
 * Rejects with a HistoryError (404 `unknown_thread`: no history, or not yours).
 */
export async function restoreThread(url, threadId, options = {}) {
  const base = url.replace(/\/+$/, "");
  const query = options.runId ? `?runId=${encodeURIComponent(options.runId)}` : "";
  const response = await fetch(`${base}/threads/${encodeURIComponent(threadId)}${query}`, {
    headers: { ...options.headers, ...runKeyHeader(options.runKey), Accept: "application/json" },
    signal: options.signal,
  });
  if (!response.ok) throw await refusal(response, "history_failed");
  let events;
  try {
    events = await response.json();
  } catch (err) {
    // a proxy's HTML page or a cut body: say so as a HistoryError, not a bare SyntaxError
    const type = response.headers.get("Content-Type") ?? "no content type";
    throw new HistoryError(`the history is not JSON (${type}): ${err.message}`, { status: response.status });
  }
  if (!Array.isArray(events)) {
    throw new HistoryError("the history is not a JSON array of events", { status: response.status });
  }
  const store = options.store ?? new ThreadStore();
  store.applyAll(events);
  return {
    store,
    events,
    runId: response.headers.get("X-AGUI-Run-Id"),
    trimmed: response.headers.get(HISTORY_TRIMMED_HEADER) === "true",
  };
}

async function threadRequest(method, url, path, options, body) {
  const headers = { ...options.headers, ...runKeyHeader(options.runKey), Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`${url.replace(/\/+$/, "")}${path}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: options.signal,
  });
  if (!response.ok) throw await refusal(response, "threads_failed");
  return response.status === 204 ? null : response.json();
}

/**
 * `listThreads(url, {limit, cursor, search, headers})`: one page of the caller's threads, newest
 * first (`GET <url>/threads`): `{threads: [{threadId, title, createdAt, updatedAt, runs,
 * latestRunId}], nextCursor}` (`nextCursor` null on the last page). Needs a per-client token;
 * throws HistoryError (`principal_required` 403, `threads_not_listed` 404, `bad_thread_request`).
 */
export async function listThreads(url, options = {}) {
  const query = new URLSearchParams();
  if (options.limit != null) query.set("limit", String(options.limit));
  if (options.cursor) query.set("cursor", options.cursor);
  if (options.search) query.set("q", options.search);
  const tail = query.toString() ? `?${query}` : "";
  return threadRequest("GET", url, `/threads${tail}`, options);
}

/** `renameThread(url, threadId, title, {runKey, headers})`: set a thread's title; the title as kept. */
export async function renameThread(url, threadId, title, options = {}) {
  const done = await threadRequest("PATCH", url, `/threads/${encodeURIComponent(threadId)}`, options, { title });
  return done.title;
}

/** `deleteThread(url, threadId, {runKey, headers})`: delete a thread (404 `unknown_thread` when not yours). */
export async function deleteThread(url, threadId, options = {}) {
  await threadRequest("DELETE", url, `/threads/${encodeURIComponent(threadId)}`, options);
}

/** `ThreadStore.restore(url, threadId, options)`: the store of `restoreThread`. */
ThreadStore.restore = async (url, threadId, options = {}) => (await restoreThread(url, threadId, options)).store;

export function connectAgent(agent, store = new ThreadStore()) {
  const sub = agent.subscribe({ onEvent: ({ event }) => { store.apply(event); } });
  return () => sub.unsubscribe();
}

/** Seconds between resume attempts after a dropped connection, and how many (then the run is given up). */
export const RESUME_DELAY_MS = 250;
export const MAX_RESUMES = 5;

/**
 * POST `input` (a RunAgentInput) to an agui-engine gateway at `url` and apply the stream to `store`.
 * When the connection drops before RUN_FINISHED / RUN_ERROR, resume with `GET <url>/runs/<runId>` and
 * `Last-Event-ID` (at most MAX_RESUMES times). `hooks.onFrame({event, id, resumed})` sees every
 * event, `hooks.onResume({lastEventId, attempt})` every reconnection, `hooks.onReader(reader)` each
 * connection's body reader (cancelling it drops that connection: the run is resumed); `hooks.signal`
 * aborts, and stops the run on the server (DELETE <url>/runs/<runId>); `hooks.headers` are added to
 * every request (e.g. Authorization). The POST declares `X-AGUI-Resumable: 1`, so the gateway keeps
 * the run through a dropped connection for its grace period (spec/transports.md §3.1); the run key
 * of its answer (`X-AGUI-Run-Key`) goes with the resume and the DELETE (§2.6). `hooks.runKey`: the run
 * key of an earlier run of the same thread, presented with the POST, so that a gateway without per-client
 * tokens keeps this run in that thread's history (§4.4).
 * Resolves to {lastEventId, resumes, terminal, runKey}.
 */
export async function runSSE(url, input, store, hooks = {}) {
  const base = url.replace(/\/+$/, "");
  let terminal = false;
  // The run key the gateway answered the POST with: resume and cancel present it (the gateway
  // answers 404 to anyone else when tokens do not tell clients apart; spec/transports.md §2.6).
  const run = { key: null };
  const prior = hooks.runKey ? { [RUN_KEY_HEADER]: hooks.runKey } : {};
  // This client resumes, so a closed connection no longer stops the run: a stop must say so.
  const stop = () => {
    if (!terminal) {
      fetch(`${base}/runs/${encodeURIComponent(input.runId)}`, {
        method: "DELETE", headers: { ...hooks.headers, ...runKeyHeader(run.key) },
      }).catch(() => {});
    }
  };
  hooks.signal?.addEventListener("abort", stop, { once: true });
  try {
    const result = await runSSEStream(url, base, input, store, hooks, (done) => { terminal = done; }, run, prior);
    return { ...result, runKey: run.key };
  } finally {
    hooks.signal?.removeEventListener("abort", stop);
  }
}

/** The request header that presents a run key (none before the gateway gave one). */
export const RUN_KEY_HEADER = "X-AGUI-Run-Key";
function runKeyHeader(key) {
  return key ? { [RUN_KEY_HEADER]: key } : {};
}

async function runSSEStream(url, base, input, store, hooks, setTerminal, run, prior) {
  let lastEventId = null;
  let resumes = 0;
  let terminal = false;
  let response = await fetch(url, {
    method: "POST",
    headers: {
      ...hooks.headers, ...prior, "Content-Type": "application/json", Accept: "text/event-stream",
      "X-AGUI-Resumable": "1",
    },
    // a 1.x client says so (as @ag-ui/client 1.0 does): the gateway then writes the 1.0 wire
    body: JSON.stringify(input.protocolVersion ? input : { ...input, protocolVersion: PROTOCOL_VERSION }),
    signal: hooks.signal,
  });
  run.key = response.headers.get(RUN_KEY_HEADER) ?? run.key;
  for (;;) {
    if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    const parser = new EventStreamParser("sse");
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    hooks.onReader?.(reader);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const text = decoder.decode(value, { stream: true });
        for (const event of parser.feed(text)) {
          lastEventId = event.__id ?? lastEventId;
          store.apply(event);
          hooks.onFrame?.({ event, id: event.__id, resumed: resumes > 0 });
          if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") {
            terminal = true;
            setTerminal(true);
          }
        }
      }
    } catch (err) {
      if (hooks.signal?.aborted) throw err;
      // a dropped connection: resume below
    }
    if (terminal || lastEventId === null || resumes >= MAX_RESUMES) break;
    resumes++;
    hooks.onResume?.({ lastEventId, attempt: resumes });
    await new Promise((resolve) => setTimeout(resolve, RESUME_DELAY_MS));
    const runId = lastEventId.slice(0, lastEventId.lastIndexOf(":"));
    response = await fetch(`${base}/runs/${encodeURIComponent(runId)}`, {
      headers: { ...hooks.headers, ...runKeyHeader(run.key), Accept: "text/event-stream", "Last-Event-ID": lastEventId },
      signal: hooks.signal,
    });
    if (response.status === 204) break;
  }
  return { lastEventId, resumes, terminal };
}


// ------------------------------------------------------------------------------------------ A2UI

// A2UI v0.9 surfaces arrive the way @ag-ui/a2ui-middleware 0.0.10 sends them: ACTIVITY_SNAPSHOT /
// ACTIVITY_DELTA of activity type "a2ui-surface" whose content is either the surface,
// {a2ui_operations: [createSurface, updateComponents, updateDataModel, deleteSurface messages]}, or
// its lifecycle before it paints, {status: "building" | "retrying" | "failed", progressTokens,
// attempt, maxAttempts, errors, error, attempts}, on the same message id (replaced in place).
// A user action goes back in the next run's forwardedProps, {a2uiAction: {userAction}}, which the
// middleware (and agui-engine's loops) turn into a `log_a2ui_event` tool call and its result.

export const A2UI_ACTIVITY_TYPE = "a2ui-surface";
export const A2UI_OPERATIONS_KEY = "a2ui_operations";
/** The A2UI v0.9 basic catalog id the middleware gives a surface when the host names none. */
export const A2UI_BASIC_CATALOG_ID = "https://a2ui.org/specification/v0_9/basic_catalog.json";

/**
 * What an a2ui-surface activity record shows: {operations} (the A2UI messages, objects only, as the
 * middleware filters them) and/or {status, ...lifecycle} (null for another activity type).
 */
export function a2uiContent(record) {
  if (!record || record.activityType !== A2UI_ACTIVITY_TYPE || !isObject(record.content)) return null;
  const { [A2UI_OPERATIONS_KEY]: ops, ...lifecycle } = record.content;
  const operations = Array.isArray(ops) ? ops.filter((op) => isObject(op)) : null;
  return { operations, status: typeof lifecycle.status === "string" ? lifecycle.status : null, lifecycle };
}

/** The surface id an A2UI message is about (undefined when it names none). */
export function a2uiSurfaceId(op) {
  for (const key of ["createSurface", "updateComponents", "updateDataModel", "deleteSurface"]) {
    if (isObject(op[key]) && typeof op[key].surfaceId === "string") return op[key].surfaceId;
  }
  return undefined;
}

/**
 * The RunAgentInput that reports an A2UI user action (what a renderer's action handler receives:
 * {name, surfaceId, sourceComponentId, timestamp, context}) to the agent: the thread's history and
 * no new user message, the action in `forwardedProps.a2uiAction.userAction`. `options`: threadId,
 * runId, tools, context, forwardedProps (merged; the action wins).
 * Throws TypeError when the action has no string `name` or `surfaceId`.
 */
export function a2uiActionInput(store, action, options = {}) {
  if (!isObject(action) || typeof action.name !== "string" || typeof action.surfaceId !== "string") {
    throw new TypeError("an A2UI user action needs a string name and surfaceId");
  }
  const run = store.runs[store.runs.length - 1];
  return {
    threadId: options.threadId ?? run?.threadId ?? `thread-${randomId()}`,
    runId: options.runId ?? `run-${randomId()}`,
    messages: store.history(),
    tools: options.tools ?? [],
    context: options.context ?? [],
    state: store.state,
    forwardedProps: { ...options.forwardedProps, a2uiAction: { userAction: clone(action) } },
  };
}

/**
 * Report an A2UI user action and follow the run it starts: `runSSE(url, a2uiActionInput(...), store,
 * hooks)`. `options` as for a2uiActionInput plus the runSSE hooks. Resolves as runSSE does.
 */
export function sendA2UIAction(url, store, action, options = {}) {
  const { threadId, runId, tools, context, forwardedProps, ...hooks } = options;
  return runSSE(url, a2uiActionInput(store, action, { threadId, runId, tools, context, forwardedProps }), store, hooks);
}

function randomId() {
  return Math.random().toString(36).slice(2, 12);
}

// ------------------------------------------------------------------------------------------ data binding

/** Where a gateway answers queries, relative to its run URL: `POST <path>/data/query`. */
export const QUERY_SUFFIX = "/data/query";
/**
 * Milliseconds `bindQuery` waits after a component's resourceId + params changed before it queries.
 * Complete params (`propsStatus` `done`) rarely change again, so this only merges the burst of
 * changes an interactable update or a re-shown component makes; 50 ms is below what a person notices.
 */
export const QUERY_DEBOUNCE_MS = 50;
/** Entries `binding.log` keeps (the oldest are dropped): a page left open must not grow without bound. */
export const MAX_QUERY_LOG = 200;

/**
 * A query the gateway (or the network) refused. `status` is the HTTP status (0: the gateway could not
 * be reached; 200: an answer that is not `{resourceId, data}`), `code` the error code of the gateway's
 * JSON body (`{"error": {"code", "message", "path"?}}`), `path` the JSON path of invalid params
 * (422; `$.city`) or null, `retryAfter` the seconds of a `Retry-After` header (429/503) or null.
 */
export class QueryError extends Error {
  constructor(message, { status = 0, code = "query_failed", path = null, resourceId = null, retryAfter = null } = {}) {
    super(message);
    this.name = "QueryError";
    this.status = status;
    this.code = code;
    this.path = path;
    this.resourceId = resourceId;
    this.retryAfter = retryAfter;
  }
}

/** `url` (an agent's run URL, as for `runSSE`) -> the URL its gateway answers queries at. */
export function queryURL(url) {
  return url.replace(/\/+$/, "") + QUERY_SUFFIX;
}

/** The run URL of the gateway that served this module (`<path>/static/agui-engine.js` -> `<path>/`). */
function servingGateway() {
  const here = import.meta.url;
  if (!/^https?:/.test(here)) {
    throw new TypeError("query: options.url (the agent's run URL) is required when agui-engine.js is not " +
                        "loaded from the gateway");
  }
  return new URL("../", here).href;
}

/** JSON with object keys sorted at every depth: equal values give equal text (the dedup key). */
export function canonicalJSON(value) {
  if (Array.isArray(value)) return "[" + value.map(canonicalJSON).join(",") + "]";
  if (isObject(value)) {
    return "{" + Object.keys(value).sort().map((k) => JSON.stringify(k) + ":" + canonicalJSON(value[k])).join(",") + "}";
  }
  return JSON.stringify(value) ?? "null";
}

function errorPath(error) {
  if (typeof error.path === "string") return error.path;
  // the engine's validation messages end with "- at $.city" (spec/components.md §5)
  const found = typeof error.message === "string" ? /- at (\$\S*)\s*$/.exec(error.message) : null;
  return found ? found[1] : null;
}

/**
 * Query the gateway for `resourceId` with `params`; resolves to the resolver's data.
 * `options`: `url` (the agent's run URL; default: the gateway that served this module), `headers`
 * (an object or a function returning one, e.g. `{Authorization: "Bearer ..."}`), `signal` (an
 * AbortSignal: aborting rejects with the signal's reason and drops the connection).
 * Rejects with a `QueryError` for every refusal (HTTP status, code, message, path) and for an
 * unreachable gateway (status 0, code "network"); with a TypeError for a resourceId that is not a
 * non-empty string or params that are not an object (nothing is sent).
 */
export async function query(resourceId, params = {}, options = {}) {
  if (typeof resourceId !== "string" || resourceId === "") throw new TypeError("query: resourceId must be a non-empty string");
  if (!isObject(params)) throw new TypeError(`query ${resourceId}: params must be an object`);
  const url = queryURL(options.url ?? servingGateway());
  const headers = typeof options.headers === "function" ? options.headers() : options.headers;
  let response;
  let text;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ resourceId, params }),
      signal: options.signal,
    });
    text = await response.text();
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason ?? err;
    throw new QueryError(`query ${resourceId}: the gateway could not be reached (${err.message})`,
                         { status: 0, code: "network", resourceId });
  }
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON (a proxy's HTML error page): reported below with the status
  }
  if (!response.ok) {
    const error = isObject(body) && isObject(body.error) ? body.error : {};
    const retry = Number.parseInt(response.headers.get("Retry-After") ?? "", 10);
    const message = typeof error.message === "string" ? error.message : `HTTP ${response.status}: ${text.slice(0, 200)}`;
    throw new QueryError(message, {
      status: response.status, code: typeof error.code === "string" ? error.code : `http_${response.status}`,
      path: errorPath(error), resourceId, retryAfter: Number.isNaN(retry) ? null : retry,
    });
  }
  if (!isObject(body) || !Object.prototype.hasOwnProperty.call(body, "data")) {
    throw new QueryError(`query ${resourceId}: the answer is not {resourceId, data}: ${text.slice(0, 200)}`,
                         { status: response.status, code: "bad_response", resourceId });
  }
  return body.data;
}

const now = () => globalThis.performance?.now() ?? Date.now();

/** `{resourceId, params}` of bound props once `complete`, else null (one check for components and tree nodes). */
function boundProps(props, complete) {
  if (!complete || !isObject(props) || typeof props.resourceId !== "string" || props.resourceId === "") return null;
  const params = props.params ?? {};
  return isObject(params) ? { resourceId: props.resourceId, params } : null;
}

/** The key a tree node's query is kept under in `QueryBinding` (a component's is its id). */
function bindingKey(componentId, nodeId) {
  return nodeId == null ? componentId : canonicalJSON([componentId, nodeId]);
}

/**
 * The queries component record `c` asks for: [{key, componentId, nodeId, q}], q = {resourceId, params}
 * or null while incomplete. A component bound itself: one (nodeId null). A `render_ui` tree: one per
 * node whose props carry a resourceId, complete once the node is `done` (or the tree ended).
 */
function boundQueries(c) {
  if (c.name === UI_SPEC_COMPONENT) {
    const found = [];
    const walkNodes = (nodes) => {
      for (const node of nodes) {
        if (!isObject(node)) continue;
        if (isObject(node.props) && typeof node.props.resourceId === "string" && typeof node.id === "string") {
          const q = boundProps(node.props, node.done === true || c.streamingState === "done");
          found.push({ key: bindingKey(c.id, node.id), componentId: c.id, nodeId: node.id, q });
        }
        if (Array.isArray(node.children)) walkNodes(node.children);
      }
    };
    walkNodes(uiNodes(c));
    return found;
  }
  const status = c.propsStatus || {};
  // Complete: the component ended, or (first stream only: an interactable update's deltas carry no
  // statusChanges, so after an end the statuses say nothing) both props are marked done.
  const complete = c.streamingState === "done" ||
    (c.finalProps === undefined && status["/resourceId"] === "done" && status["/params"] === "done");
  return [{ key: c.id, componentId: c.id, nodeId: null, q: boundProps(c.props, complete) }];
}

/**
 * Keeps the data of every component of `store` whose props carry `{resourceId, params}`, and of every
 * such node of a `render_ui` tree (see the top of this file). `options`: `url`, `headers` (as for `query`), `debounceMs` (QUERY_DEBOUNCE_MS),
 * `abortSuperseded` (default true: a newer query aborts the older one; either way the older answer is
 * never applied). Returns a QueryBinding.
 */
export function bindQuery(store, options = {}) {
  return new QueryBinding(store, options);
}

/**
 * One store's queries. `get(componentId, nodeId?)`: {componentId, nodeId, resourceId, params, key,
 * status ("loading" | "ok" | "error"), data, error (a QueryError), seq, ms, version} (a new object on
 * each change; `nodeId` names a bound node of a `render_ui` tree, null for a component);
 * `log`: every query, newest last (at most MAX_QUERY_LOG), {seq, componentId, nodeId, resourceId,
 * params, status ("loading" | "ok" | "error" | "stale" | "aborted"), httpStatus, ms, data, error};
 * `version` grows on each change. `subscribe(listener)` -> unsubscribe (`listener(binding, entry)`);
 * `query(resourceId, params)` a query by hand (logged, bound to no component); `refresh(componentId,
 * nodeId?)` queries again with the same params; `stop()` aborts everything and leaves the store.
 */
export class QueryBinding {
  constructor(store, options = {}) {
    this.store = store;
    this.options = options;
    this.debounceMs = options.debounceMs ?? QUERY_DEBOUNCE_MS;
    this.results = new Map(); // bindingKey(componentId, nodeId) -> result
    this.log = [];
    this.version = 0;
    this._seq = 0;
    this._bound = new Map(); // bindingKey(componentId, nodeId) -> {key, timer, controller, seq}
    this._listeners = new Set();
    this.subscribe = this.subscribe.bind(this);
    this._unsubscribe = store.subscribe((s, event) => {
      const id = isObject(event?.value) ? event.value.componentId : undefined;
      if (typeof id === "string") this._consider(id);
    });
    for (const id of store.components.keys()) this._consider(id);
  }

  subscribe(listener) {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  get(componentId, nodeId = null) {
    return this.results.get(bindingKey(componentId, nodeId));
  }

  refresh(componentId, nodeId = null) {
    const found = this.store.components.get(componentId);
    const target = found && boundQueries(found).find((t) => t.nodeId === nodeId);
    const bound = target && this._bound.get(target.key);
    if (bound && target.q) this._start(target, target.q, bound);
  }

  /** A query by hand (the inspector's form); resolves to its log entry. */
  query(resourceId, params) {
    return this._run(null, resourceId, params, undefined);
  }

  stop() {
    this._unsubscribe();
    for (const bound of this._bound.values()) {
      clearTimeout(bound.timer);
      bound.controller?.abort();
    }
    this._bound.clear();
  }

  _notify(entry) {
    this.version++;
    for (const listener of this._listeners) listener(this, entry);
  }

  _consider(componentId) {
    const c = this.store.components.get(componentId);
    for (const target of c ? boundQueries(c) : []) {
      const q = target.q;
      if (!q) continue;
      const key = canonicalJSON([q.resourceId, q.params]);
      let bound = this._bound.get(target.key);
      if (bound && bound.key === key) continue; // the same query: an unrelated prop (or node) changed
      if (!bound) this._bound.set(target.key, (bound = { key, timer: null, controller: null, seq: 0 }));
      bound.key = key;
      clearTimeout(bound.timer);
      // params are copied now: later deltas mutate the props in place
      const frozen = { resourceId: q.resourceId, params: JSON.parse(JSON.stringify(q.params)) };
      if (this.debounceMs > 0) bound.timer = setTimeout(() => this._start(target, frozen, bound), this.debounceMs);
      else this._start(target, frozen, bound);
    }
  }

  _start(target, q, bound) {
    bound.timer = null;
    if (this.options.abortSuperseded !== false) bound.controller?.abort();
    bound.controller = new AbortController();
    this._run(target, q.resourceId, q.params, bound);
  }

  async _run(target, resourceId, params, bound) {
    const seq = ++this._seq;
    const key = canonicalJSON([resourceId, params]);
    const started = now();
    const componentId = target ? target.componentId : null;
    const nodeId = target ? target.nodeId : null;
    const entry = { seq, componentId, nodeId, resourceId, params, status: "loading", httpStatus: null, ms: null,
                    data: undefined, error: null };
    this.log.push(entry);
    if (this.log.length > MAX_QUERY_LOG) this.log.splice(0, this.log.length - MAX_QUERY_LOG);
    const current = () => !bound || bound.seq === seq;
    if (bound) {
      bound.seq = seq;
      const previous = this.results.get(target.key);
      // the last data stays visible while the new query runs
      this.results.set(target.key, { componentId, nodeId, resourceId, params, key, status: "loading",
                                      data: previous?.data, error: null, seq, ms: null, version: this.version + 1 });
    }
    this._notify(entry);
    const signal = bound ? bound.controller.signal : undefined;
    try {
      entry.data = await query(resourceId, params, { url: this.options.url, headers: this.options.headers, signal });
      entry.status = "ok";
      entry.httpStatus = 200;
    } catch (err) {
      entry.error = err;
      entry.httpStatus = err instanceof QueryError ? err.status : null;
      entry.status = signal?.aborted ? "aborted" : "error";
    }
    entry.ms = Math.round(now() - started);
    if (entry.status !== "aborted" && !current()) entry.status = "stale"; // a newer query owns the result
    if (bound && current() && entry.status !== "aborted") {
      this.results.set(target.key, { componentId, nodeId, resourceId, params, key, status: entry.status, data: entry.data,
                                      error: entry.error, seq, ms: entry.ms, version: this.version + 1 });
    }
    this._notify(entry);
    return entry;
  }
}

// ------------------------------------------------------------------------------------------ A2UI resource-bound data

/** The key of an A2UI data-model value the client fills from a server resource (spec/a2ui.md). */
export const A2UI_RESOURCE_KEY = "$resource";

function resourceRef(value) {
  return isObject(value) && Object.keys(value).length === 1 && Object.hasOwn(value, A2UI_RESOURCE_KEY)
    ? value[A2UI_RESOURCE_KEY] : undefined;
}

function escapeToken(token) {
  return String(token).replace(/~/g, "~0").replace(/\//g, "~1");
}

function walkRefs(value, pointer, out) {
  const ref = resourceRef(value);
  if (ref !== undefined) out.push([pointer, ref]);
  else if (Array.isArray(value)) value.forEach((item, i) => walkRefs(item, `${pointer}/${i}`, out));
  else if (isObject(value)) for (const [key, item] of Object.entries(value)) walkRefs(item, `${pointer}/${escapeToken(key)}`, out);
}

function dataOps(operations) {
  return (Array.isArray(operations) ? operations : [])
    .map((op) => (isObject(op) ? op.updateDataModel : undefined))
    .filter((body) => isObject(body) && typeof body.surfaceId === "string");
}

/**
 * The resource-bound paths of an A2UI surface's operations (e.g. `Thread`'s / an `a2ui-surface`
 * activity's `a2ui_operations`): every `{"$resource": {resourceId, params}}` value an
 * `updateDataModel` writes, as `{surfaceId, path, resourceId, params}` with `path` the data-model
 * JSON pointer it lands at. A later write of a path replaces the bindings under it; a malformed
 * binding is skipped. Never throws.
 */
export function a2uiResourceBindings(operations) {
  const found = new Map();
  for (const body of dataOps(operations)) {
    const raw = typeof body.path === "string" ? body.path : "/";
    const base = raw === "/" ? "" : raw.replace(/\/+$/, "");
    for (const key of [...found.keys()]) if (!base || key === base || key.startsWith(base + "/")) found.delete(key);
    const refs = [];
    walkRefs(body.value, base, refs);
    for (const [pointer, ref] of refs) {
      const params = isObject(ref) && ref.params !== undefined ? ref.params : {};
      if (isObject(ref) && typeof ref.resourceId === "string" && ref.resourceId && isObject(params)) {
        found.set(pointer || "/", { surfaceId: body.surfaceId, path: pointer || "/", resourceId: ref.resourceId, params });
      }
    }
  }
  return [...found.values()];
}

function setPointer(doc, pointer, value) {
  if (pointer === "" || pointer === "/") return value;
  const tokens = parsePointer(pointer);
  const root = isObject(doc) || Array.isArray(doc) ? doc : {};
  let node = root;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    const last = i === tokens.length - 1;
    if (Array.isArray(node)) {
      const index = token === "-" ? node.length : /^\d+$/.test(token) ? Number(token) : -1;
      if (index < 0 || index > node.length) return root; // a path the data model cannot hold: left as it is
      if (last) { node[index] = value; return root; }
      if (!(isObject(node[index]) || Array.isArray(node[index]))) node[index] = {};
      node = node[index];
    } else {
      if (last) { node[token] = value; return root; }
      if (!(isObject(node[token]) || Array.isArray(node[token]))) node[token] = {};
      node = node[token];
    }
  }
  return root;
}

/**
 * The data model an A2UI surface's `updateDataModel` operations leave (in order), with `filled`
 * (`{pointer: value}`) written over it. Works on a copy; never throws for remote input.
 */
export function a2uiDataModel(operations, filled = {}) {
  let model = {};
  for (const body of dataOps(operations)) {
    model = setPointer(model, typeof body.path === "string" ? body.path : "/", clone(body.value ?? null));
  }
  for (const [pointer, value] of Object.entries(filled)) model = setPointer(model, pointer, value);
  return isObject(model) ? model : {};
}

/**
 * Fill an A2UI surface's resource-bound paths through the gateway: one `query()` per binding of
 * `a2uiResourceBindings(operations)` (all at once), each answer written at its path. Resolves to
 * the data model the surface's components bind to. `options` as for `query` (`url`: the agent's run
 * URL, `headers`, `signal`). Rejects with the first binding's `QueryError` (`status`, `code`:
 * 403 `forbidden`, 404 `unknown_resource`, 422 `invalid_params` with `path` ...).
 */
export async function a2uiData(operations, options = {}) {
  const bindings = a2uiResourceBindings(operations);
  const answers = await Promise.all(bindings.map((b) => query(b.resourceId, b.params, options)));
  const filled = {};
  bindings.forEach((b, i) => { filled[b.path] = answers[i]; });
  return a2uiDataModel(operations, filled);
}

// ------------------------------------------------------------------------------------------ MCP Apps host

// The MCP Apps host (stable 2026-01-26) for applications: `new McpAppHost(container, {endpoint, headers,
// confirmLink?, message?})`, fed every event (`host.event(event)`), draws each app through the gateway's
// sandbox proxy and answers every request of the spec with the user in control; `host.modelContext()` is
// what the next run's `context` carries (mcp-apps.js has the whole contract).
export {
  APP_PROTOCOL_VERSION, AppError, DISPLAY_MODES, MCP_APPS_ACTIVITY, MCP_APP_ANNOUNCE_EVENT, MCP_APP_INPUT_EVENT,
  McpApp, McpAppHost, appResource, proxyRequest,
} from "./mcp-apps.js";
