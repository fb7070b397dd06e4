// The inspector's A2UI surfaces: each "a2ui-surface" activity of the store drawn live with the official
// A2UI v0.9 Lit renderer (a2ui-lit.js: @a2ui/lit 0.11.0, vendored), or with this module's own safe
// drawing when the renderer refuses the surface (or could not load).
//
// A2UI v1.0 surfaces (operations whose `version` is "v1.0") are drawn too. No renderer published on npm
// supports v1.0 yet (@a2ui/lit 0.11.0, @a2ui/react 0.11.1 and @a2ui/web_core 0.11.0 export v0_8 and v0_9
// only), so a v1.0 operation is handed to the v0.9 renderer in its v0.9 form (`forRenderer`: the same
// components and data; a createSurface carrying its components and dataModel inline, as v1.0 allows, is
// split into createSurface + updateComponents + updateDataModel; the v1.0 basic catalog id is an alias
// of the basic catalog). Where v1.0 differs (a prop v0.9's schema lacks, e.g. TextField's placeholder),
// the renderer refuses and the fallback drawing shows the surface. The card says which version it is
// (`data-a2ui-version`).
//
// Theory of operation
// -------------------
// One SurfaceView per activity message, kept across renders (a surface's elements, its typed-in values
// and focus survive the stream), updated only when the activity record's `version` changes:
//
//   * lifecycle content ({status: building | retrying | failed, ...}) is shown as a status line
//     (`data-lifecycle`), with the attempt count and the errors the agent was told about; when it
//     replaces a painted surface (the engine retries a call it refused late), the surface is removed;
//   * operations ({a2ui_operations: [...]}) go to the view's own MessageProcessor, incrementally: the
//     middleware re-sends the whole surface in every snapshot, so an operation equal (as JSON) to the
//     one at the same index of the last content is skipped, and a createSurface for a surface the
//     view already has (same catalog) is skipped; each new surface gets an <a2ui-surface> element.
//   * when the processor throws (an unknown catalog, a component that fails its schema, an update for
//     a surface never created...) the view is redrawn from all the operations with a fresh processor
//     once more; if that throws too, the fallback drawing shows the surface (`data-renderer="fallback"`)
//     with the renderer's error. The next content tries the renderer again.
//
// Every surface is checked before anything draws it (`surfaceProblem`), whatever brought it: a surface
// that reaches the page as an activity (a remote agent's, a tool's `a2ui_operations` result) has not been
// through render_a2ui's checks. A component-reference cycle, a child tree deeper than MAX_A2UI_DEPTH, more
// than MAX_A2UI_COMPONENTS components (or a tree that would draw more than that many, a component being
// drawn once per reference) or JSON nested deeper than MAX_A2UI_JSON_DEPTH is refused: the view shows the
// refusal (`data-renderer="refused"`) and draws nothing of it; a later content of the same activity that
// passes is drawn. The limits are the server's own constants (agui_engine.genui.a2ui, spec/limits.md),
// served as the generated module a2ui-limits.js. The check is linear in the surface and never recurses
// (a hostile surface cannot overflow the stack of the check itself).
//
// Nothing in a surface's strings is parsed as HTML: the renderer binds text with Lit (escaped; no
// markdown renderer is configured, so Text shows its text as text), and the fallback uses textContent
// and attribute-free elements only (no URL of the surface is ever loaded).
//
// Actions: the renderer's action handler (and the fallback's buttons) call `onAction(action)` with the
// A2UI v0.9 client action {name, surfaceId, sourceComponentId, timestamp, context}; the inspector sends it
// with agui-engine.js's sendA2UIAction (forwardedProps.a2uiAction.userAction, the middleware's convention).

import { A2UI_BASIC_CATALOG_ID, a2uiContent, a2uiSurfaceId } from "./agui-engine.js";

/** The A2UI v1.0 basic catalog id (agui_engine.genui.a2ui.BASIC_CATALOG_V1_ID). */
export const A2UI_BASIC_CATALOG_V1_ID = "https://a2ui.org/specification/v1_0/catalogs/basic/catalog.json";
import { MAX_A2UI_COMPONENTS, MAX_A2UI_DEPTH, MAX_A2UI_JSON_DEPTH } from "./a2ui-limits.js";

/** Deepest component nesting the fallback drawing follows (a cycle or a very deep tree stops there). */
export const FALLBACK_MAX_DEPTH = 32;

let lit = null;
let litError = null;
/** Resolves once the vendored renderer is loaded (or failed to: `rendererError()` says why). */
export const rendererReady = import("./a2ui-lit.js").then(
  (module) => { lit = module; },
  (err) => { litError = err; },
);
export function rendererError() {
  return litError;
}

// The catalogs a surface may name: the renderer's basic catalog under its own id, under the id the
// middleware gives a surface by default (both are the A2UI v0.9 basic catalog) and under the v1.0 basic
// catalog's id (its components, drawn by the v0.9 renderer: see the top).
function catalogs() {
  const basic = lit.basicCatalog;
  const alias = (id) => new lit.Catalog(id, [...basic.components.values()], [...basic.functions.values()],
                                        basic.themeSchema);
  return [basic, alias(A2UI_BASIC_CATALOG_ID), alias(A2UI_BASIC_CATALOG_V1_ID)];
}

/** The operations of a v1.0 operation in their v0.9 form (what the v0.9 renderer takes); others as they are. */
export function forRenderer(op) {
  if (!op || op.version !== "v1.0") return [op];
  const { version: _v, ...body } = op;
  const create = body.createSurface;
  if (!create || typeof create !== "object") return [{ version: "v0.9", ...body }];
  const { components, dataModel, metadata: _m, ...head } = create;
  const out = [{ version: "v0.9", createSurface: { ...head, catalogId: head.catalogId ?? A2UI_BASIC_CATALOG_V1_ID } }];
  if (Array.isArray(components)) out.push({ version: "v0.9", updateComponents: { surfaceId: head.surfaceId, components } });
  if (dataModel !== undefined) out.push({ version: "v0.9", updateDataModel: { surfaceId: head.surfaceId, path: "/", value: dataModel } });
  return out;
}

// ------------------------------------------------------------------------------------------ the check

// Props that reference other components: the v0.9/v1.0 basic catalogs' `child`, `children` (ids or a
// {componentId, path} template), Modal's `trigger`/`content`, and the `child` of each Tabs item; older
// names (`entryPointChild`, `contentChild`, `tabItems`) too. A string there that names no component of
// the surface is no edge (so a text prop that happens to equal an id adds an edge only under these names).
const REF_PROPS = ["child", "children", "trigger", "content", "entryPointChild", "contentChild"];
const REF_ITEM_LISTS = ["tabs", "tabItems"];

function refsOf(component, out) {
  const push = (value) => {
    if (typeof value === "string") out.push(value);
    else if (value && typeof value === "object" && typeof value.componentId === "string") out.push(value.componentId);
  };
  for (const key of REF_PROPS) {
    const value = component[key];
    if (Array.isArray(value)) value.forEach(push);
    else push(value);
  }
  for (const key of REF_ITEM_LISTS) {
    const items = component[key];
    if (Array.isArray(items)) for (const item of items) if (item && typeof item === "object") push(item.child);
  }
  return out;
}

/** How deep `value` nests (objects and arrays), counted without recursion; stops past `limit`. */
function jsonDepth(value, limit) {
  let deepest = 0;
  const stack = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop();
    if (v === null || typeof v !== "object") continue;
    if (d > deepest) deepest = d;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === "object") stack.push([child, d + 1]);
    }
  }
  return deepest;
}

function refusal(code, surfaceId, message, componentId) {
  return { code, surfaceId, componentId, message };
}

/**
 * Why the A2UI operations of one activity must not be drawn ({code, surfaceId, componentId?, message}),
 * or null when they may. Codes and words as agui_engine.genui.a2ui's refusals: `too_many_components`,
 * `too_large` (JSON nesting), `child_cycle` ("a -> b -> a", rotated to start at the smallest id, as the
 * server reports it), `too_deep`. Linear in the operations; no recursion.
 */
export function surfaceProblem(operations) {
  const surfaces = new Map(); // surfaceId -> {entries, components: Map id -> component}
  for (const op of operations) {
    const id = a2uiSurfaceId(op) ?? "default";
    if (op.deleteSurface) { surfaces.delete(id); continue; }
    if (op.createSurface || !surfaces.has(id)) surfaces.set(id, { entries: 0, components: new Map() });
    const s = surfaces.get(id);
    const list = op.updateComponents?.components ?? op.createSurface?.components; // v1.0: inline in createSurface
    if (Array.isArray(list)) {
      s.entries += list.length;
      if (s.entries > MAX_A2UI_COMPONENTS) {
        return refusal("too_many_components", id,
                       `A surface holds at most ${MAX_A2UI_COMPONENTS} components, got ${s.entries}`);
      }
    }
    if (jsonDepth(op, MAX_A2UI_JSON_DEPTH + 3) > MAX_A2UI_JSON_DEPTH + 3) { // + the op's own 3 levels
      return refusal("too_large", id, `The surface's JSON nests deeper than ${MAX_A2UI_JSON_DEPTH} levels`);
    }
    if (Array.isArray(list)) {
      for (const c of list) if (c && typeof c === "object" && typeof c.id === "string") s.components.set(c.id, c);
    }
  }
  for (const [surfaceId, s] of surfaces) {
    const problem = treeProblem(surfaceId, s.components);
    if (problem) return problem;
  }
  return null;
}

// Cycles (any component), then the tree under "root": its longest path (what a renderer recurses
// through) and how many components drawing it draws (each reference drawn, templates once).
function treeProblem(surfaceId, components) {
  const edges = new Map();
  for (const [id, c] of components) edges.set(id, refsOf(c, []).filter((ref) => components.has(ref)));
  const color = new Map(); // 1 on the path, 2 done
  const depth = new Map(); // levels under a done component, itself included
  const drawn = new Map(); // components drawing it draws (capped just past the limit)
  for (const start of edges.keys()) {
    if (color.has(start)) continue;
    const frames = [[start, 0]];
    const path = [start];
    color.set(start, 1);
    while (frames.length) {
      const frame = frames[frames.length - 1];
      const next = edges.get(frame[0]);
      if (frame[1] < next.length) {
        const child = next[frame[1]++];
        const c = color.get(child);
        if (c === undefined) {
          color.set(child, 1);
          path.push(child);
          frames.push([child, 0]);
        } else if (c === 1) {
          const loop = path.slice(path.lastIndexOf(child));
          let m = 0;
          loop.forEach((x, i) => { if (x < loop[m]) m = i; });
          const canon = [...loop.slice(m), ...loop.slice(0, m)];
          return refusal("child_cycle", surfaceId, "Child reference cycle detected: " + [...canon, canon[0]].join(" -> "),
                         canon[0]);
        }
        continue;
      }
      let d = 1;
      let n = 1;
      for (const child of next) {
        d = Math.max(d, depth.get(child) + 1);
        n = Math.min(n + drawn.get(child), MAX_A2UI_COMPONENTS + 1);
      }
      depth.set(frame[0], d);
      drawn.set(frame[0], n);
      color.set(frame[0], 2);
      frames.pop();
      path.pop();
    }
  }
  if (!components.has("root")) return null;
  if (depth.get("root") > MAX_A2UI_DEPTH) {
    return refusal("too_deep", surfaceId,
                   `The child tree is ${depth.get("root")} levels deep under 'root'; at most ${MAX_A2UI_DEPTH} are drawn`,
                   "root");
  }
  if (drawn.get("root") > MAX_A2UI_COMPONENTS) {
    return refusal("too_many_components", surfaceId,
                   `Drawing the tree under 'root' would draw more than ${MAX_A2UI_COMPONENTS} components `
                   + "(a component referenced from several places is drawn at each)", "root");
  }
  return null;
}

// ------------------------------------------------------------------------------------------ the view

function element(tag, cls, text) {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
}

export class SurfaceView {
  constructor(messageId, onAction) {
    this.messageId = messageId;
    this.onAction = onAction;
    this.version = -1;
    this.el = element("div", "a2ui-activity card");
    this.el.dataset.messageId = messageId;
    this.head = element("header", null, "A2UI surface ");
    this.head.append(element("small", null, messageId));
    this.statusLine = element("div", "a2ui-status");
    this.body = element("div", "a2ui-body");
    this.problem = element("div", "a2ui-problem");
    this.el.append(this.head, this.statusLine, this.problem, this.body);
    this.processor = null;
    this.applied = []; // JSON of the operations last applied, by index
    this.surfaces = new Map(); // surfaceId -> <a2ui-surface>
    this.operations = [];
  }

  /** Bring the view up to `record` (an activity record of the store); a no-op for a seen version. */
  update(record) {
    if (record.version === this.version) return;
    this.version = record.version;
    const content = a2uiContent(record);
    if (!content) return;
    this.showLifecycle(content);
    if (content.operations) {
      const refused = surfaceProblem(content.operations);
      if (refused) {
        this.operations = [];
        this.reset();
        this.refuse(refused);
        return;
      }
      this.operations = content.operations;
      this.el.dataset.a2uiVersion = content.operations.some((op) => op?.version === "v1.0") ? "v1.0" : "v0.9";
      this.draw();
    } else if (this.operations.length) {
      // a painted surface replaced by its lifecycle (a refused call is retried): nothing of it stays
      this.operations = [];
      this.reset();
      this.renderer(this.el.dataset.renderer ?? "lit", "");
    }
  }

  showLifecycle({ status, lifecycle, operations }) {
    this.el.dataset.lifecycle = status ?? (operations ? "painted" : "unknown");
    const parts = [];
    if (status) parts.push(status);
    if (lifecycle.attempt != null) parts.push(`attempt ${lifecycle.attempt}/${lifecycle.maxAttempts ?? "?"}`);
    if (lifecycle.progressTokens != null) parts.push(`~${lifecycle.progressTokens} tokens`);
    if (typeof lifecycle.error === "string") parts.push(lifecycle.error);
    for (const e of Array.isArray(lifecycle.errors) ? lifecycle.errors : []) {
      parts.push(typeof e === "string" ? e : [e.componentId, e.path, e.message].filter((x) => x != null).join(" "));
    }
    this.statusLine.textContent = parts.join(" · ");
    this.statusLine.hidden = parts.length === 0;
  }

  draw() {
    if (!lit) {
      this.fallback(litError ? `the A2UI renderer did not load: ${litError.message}` : "the A2UI renderer is loading");
      return;
    }
    try {
      this.applyIncrementally();
      this.renderer("lit", "");
    } catch (first) {
      try {
        this.reset();
        this.applyIncrementally();
        this.renderer("lit", "");
      } catch (err) {
        this.reset();
        this.fallback(`the A2UI renderer refused this surface: ${err.message}`);
      }
    }
  }

  refuse({ code, surfaceId, componentId, message }) {
    this.el.dataset.lifecycle = "refused";
    const where = componentId ? `surface ${surfaceId}, component ${componentId}` : `surface ${surfaceId}`;
    this.renderer("refused", `refused, not drawn: [${code}] ${where}: ${message}`);
  }

  renderer(kind, problem) {
    this.el.dataset.renderer = kind;
    this.problem.textContent = problem;
    this.problem.hidden = !problem;
  }

  reset() {
    for (const el of this.surfaces.values()) el.remove();
    this.surfaces.clear();
    this.processor = null;
    this.applied = [];
    this.body.replaceChildren();
  }

  applyIncrementally() {
    if (!this.processor) {
      this.body.replaceChildren();
      this.processor = new lit.MessageProcessor(catalogs(), (action) => this.onAction(action));
      this.processor.onSurfaceCreated((surface) => {
        const el = document.createElement("a2ui-surface");
        el.dataset.surfaceId = surface.id;
        el.surface = surface;
        this.surfaces.set(surface.id, el);
        this.body.append(el);
      });
      this.processor.onSurfaceDeleted((id) => {
        this.surfaces.get(id)?.remove();
        this.surfaces.delete(id);
      });
    }
    const ops = this.operations.flatMap(forRenderer);
    const next = ops.map((op) => JSON.stringify(op));
    next.forEach((json, i) => {
      if (this.applied[i] === json) return;
      const op = ops[i];
      const existing = op.createSurface && this.processor.model.getSurface(op.createSurface.surfaceId);
      if (!existing || existing.catalog.id !== op.createSurface.catalogId) this.processor.processMessages([op]);
      this.applied[i] = json;
    });
    this.applied.length = next.length;
  }

  // The own drawing: each surface's tree from its "root" (children by id, templates over data arrays),
  // every component a box naming it, its text-like props as text, a Button a <button> that sends the
  // action with its context resolved against the surface's data model.
  fallback(problem) {
    this.renderer("fallback", problem);
    const bySurface = new Map();
    for (const op of this.operations.flatMap(forRenderer)) {
      const id = a2uiSurfaceId(op) ?? "default";
      if (!bySurface.has(id)) bySurface.set(id, { components: new Map(), data: {} });
      const s = bySurface.get(id);
      if (op.deleteSurface) bySurface.delete(id);
      for (const c of op.updateComponents?.components ?? []) if (c && typeof c.id === "string") s.components.set(c.id, c);
      if (op.updateDataModel) s.data = setPath(s.data, op.updateDataModel.path ?? "/", op.updateDataModel.value);
    }
    this.body.replaceChildren(...[...bySurface].map(([surfaceId, s]) => {
      const box = element("div", "a2ui-fallback");
      box.dataset.surfaceId = surfaceId;
      box.append(this.fallbackNode(surfaceId, s, "root", "/", 0));
      return box;
    }));
  }

  fallbackNode(surfaceId, s, id, scope, depth) {
    const c = s.components.get(id);
    const node = element("div", "a2ui-node");
    node.dataset.componentId = id;
    if (!c || depth > FALLBACK_MAX_DEPTH) {
      node.classList.add("missing");
      node.textContent = c ? `(${id}: deeper than ${FALLBACK_MAX_DEPTH})` : `(${id}: not received yet)`;
      return node;
    }
    node.dataset.component = String(c.component);
    const label = element("span", "a2ui-name", String(c.component));
    node.append(label);
    for (const key of ["text", "label", "value", "name", "description", "url"]) {
      if (c[key] === undefined) continue;
      const v = resolve(c[key], s.data, scope);
      node.append(element("span", "a2ui-prop", `${key}: ${typeof v === "string" ? v : JSON.stringify(v)}`));
    }
    const children = [];
    if (typeof c.child === "string") children.push([c.child, scope]);
    for (const key of ["entryPointChild", "contentChild"]) if (typeof c[key] === "string") children.push([c[key], scope]);
    if (Array.isArray(c.children)) for (const child of c.children) children.push([String(child), scope]);
    else if (c.children && typeof c.children.componentId === "string" && typeof c.children.path === "string") {
      const path = absolute(c.children.path, scope);
      const items = getPath(s.data, path);
      if (Array.isArray(items)) items.forEach((_, i) => children.push([c.children.componentId, `${path}/${i}`]));
    }
    for (const tab of Array.isArray(c.tabItems) ? c.tabItems : []) if (tab && typeof tab.child === "string") children.push([tab.child, scope]);
    if (c.component === "Button") {
      const button = element("button", "a2ui-button");
      button.type = "button";
      button.dataset.componentId = id;
      for (const [childId, childScope] of children) button.append(this.fallbackNode(surfaceId, s, childId, childScope, depth + 1));
      button.addEventListener("click", () => {
        const event = c.action?.event;
        if (!event || typeof event.name !== "string") return;
        const context = {};
        for (const [k, v] of Object.entries(event.context ?? {})) context[k] = resolve(v, s.data, scope);
        this.onAction({ name: event.name, surfaceId, sourceComponentId: id, timestamp: new Date().toISOString(), context });
      });
      node.append(button);
      return node;
    }
    for (const [childId, childScope] of children) node.append(this.fallbackNode(surfaceId, s, childId, childScope, depth + 1));
    return node;
  }
}

// A value or a {path} binding (absolute, or relative to a template item's scope) read from `data`.
function resolve(value, data, scope) {
  if (value && typeof value === "object" && !Array.isArray(value) && typeof value.path === "string") {
    return getPath(data, absolute(value.path, scope));
  }
  return value;
}

function absolute(path, scope) {
  return path.startsWith("/") ? path : `${scope.replace(/\/$/, "")}/${path}`;
}

function tokens(path) {
  return path.split("/").filter((t) => t !== "").map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function getPath(data, path) {
  let v = data;
  for (const t of tokens(path)) {
    if (v === null || typeof v !== "object" || !Object.hasOwn(v, t)) return undefined;
    v = v[t];
  }
  return v;
}

function setPath(data, path, value) {
  const ts = tokens(path);
  if (!ts.length) return value && typeof value === "object" ? value : {};
  const root = data && typeof data === "object" ? data : {};
  let v = root;
  for (const t of ts.slice(0, -1)) {
    if (v[t] === null || typeof v[t] !== "object") v[t] = {};
    v = v[t];
  }
  v[ts[ts.length - 1]] = value;
  return root;
}

/**
 * Keep one SurfaceView per a2ui-surface activity of `store` inside `root`, in arrival order; `views`
 * (a Map the caller keeps) is updated in place. `onAction(action, view)` receives the user actions.
 */
export function renderSurfaces(root, store, views, onAction) {
  const wanted = [];
  for (const record of store.activities.values()) {
    if (!a2uiContent(record)) continue;
    let view = views.get(record.id);
    if (!view) {
      view = new SurfaceView(record.id, (action) => onAction(action, view));
      views.set(record.id, view);
    }
    view.update(record);
    wanted.push(view.el);
  }
  for (const [id, view] of views) if (!store.activities.has(id)) views.delete(id);
  wanted.forEach((el, i) => {
    if (root.children[i] !== el) root.insertBefore(el, root.children[i] ?? null);
  });
  while (root.children.length > wanted.length) root.lastChild.remove();
}
