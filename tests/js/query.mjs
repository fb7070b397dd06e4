// The shipped query() helper and bindQuery() against a real agui-engine gateway.
// usage: node query.mjs <agui-engine.js> <run url> <token>
// Prints one JSON object: {calls: {name: outcome}, binding: {...}}; the Python test asserts on it.
import { pathToFileURL } from "node:url";

const mod = await import(pathToFileURL(process.argv[2]).href);
const url = process.argv[3];
const headers = { Authorization: `Bearer ${process.argv[4]}` };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function outcome(err) {
  if (!(err instanceof Error)) return { threw: String(err) };
  return { name: err.name, isQueryError: err instanceof mod.QueryError, status: err.status ?? null,
           code: err.code ?? null, path: err.path ?? null, retryAfter: err.retryAfter ?? null, message: err.message };
}

async function call(resourceId, params, options = {}) {
  const started = performance.now();
  try {
    const data = await mod.query(resourceId, params, { url, headers, ...options });
    return { ok: true, data, ms: performance.now() - started };
  } catch (err) {
    return { ok: false, error: outcome(err), ms: performance.now() - started };
  }
}

async function until(check, what, deadlineMs = 10_000) {
  const end = performance.now() + deadlineMs;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

const calls = {};
calls.ok = await call("weather.current", { city: "Paris" });
calls.unknown = await call("no.such.resource", {});
calls.invalid = await call("weather.current", { city: 42 });
calls.forbidden = await call("test.private", {}, { headers: { Authorization: "Bearer bob-token" } });
calls.allowed = await call("test.private", {}, { headers: { Authorization: "Bearer alice-token" } });
calls.unauthenticated = await call("weather.current", { city: "Paris" }, { headers: {} });
calls.failing = await call("test.failing", {});
calls.timeout = await call("test.slow", { ms: 60_000, tag: "too slow" });
calls.network = await call("weather.current", { city: "Paris" }, { url: "http://127.0.0.1:9/" });
const controller = new AbortController();
setTimeout(() => controller.abort(), 100);
calls.aborted = await call("test.slow", { ms: 1500, tag: "aborted" }, { signal: controller.signal });
// two at once on a resource that runs one query at a time: the second waits out the queue, then 503
[calls.busyFirst, calls.busy] = await Promise.all([call("test.busy", {}), sleep(50).then(() => call("test.busy", {}))]);
calls.headersFunction = await call("weather.current", { city: "Tokyo" }, { headers: () => headers });
try {
  await mod.query("", {}, { url });
  calls.badId = { ok: true };
} catch (err) {
  calls.badId = { ok: false, error: outcome(err) };
}

// ---------------------------------------------------------------- bindQuery over a store fed like a stream
const custom = (name, value) => ({ type: "CUSTOM", name, value });
const start = (id, name = "WeatherCard") =>
  custom(mod.COMPONENT_START, { messageId: "m-" + id, componentId: id, componentName: name });
// statusChanges as the engine sends them: only what the delta's own operations do not imply
const delta = (id, operations, statusChanges) =>
  custom(mod.COMPONENT_PROPS_DELTA, statusChanges ? { componentId: id, operations, statusChanges }
                                                 : { componentId: id, operations });
const end = (id, finalProps) => custom(mod.COMPONENT_END, { componentId: id, finalProps });

const store = new mod.ThreadStore();
const binding = mod.bindQuery(store, { url, headers, debounceMs: 20 });
const seen = []; // [log length] after each event, to show when queries started
const feed = async (event) => {
  store.apply(event);
  await sleep(40); // longer than the debounce: a query that was going to start has started
  seen.push(binding.log.length);
};

// c1: the resource id and the params stream in; the query starts when both are done, once.
await feed(start("c1"));
await feed(delta("c1", [{ op: "add", path: "/resourceId", value: "weather.cur" }]));  // implied: started
await feed(delta("c1", [{ op: "append", path: "/resourceId", value: "rent" }], { "/resourceId": "done" }));
await feed(delta("c1", [{ op: "add", path: "/params", value: {} }]));
await feed(delta("c1", [{ op: "add", path: "/params/city", value: "Par" }]));
const beforeDone = binding.log.length;
await feed(delta("c1", [{ op: "append", path: "/params/city", value: "is" }],
                 { "/params/city": "done", "/params": "done" }));
// unrelated props stream on: no new query
await feed(delta("c1", [{ op: "add", path: "/note", value: "Bring" }]));
await feed(delta("c1", [{ op: "append", path: "/note", value: " an umbrella" }], { "/note": "done" }));
await until(() => binding.get("c1")?.status === "ok", "c1's data");
const c1First = binding.get("c1");
// the end with the same params (keys in another order would be the same key too): no new query
await feed(end("c1", { resourceId: "weather.current", params: { city: "Paris" }, note: "Bring an umbrella" }));
const afterEnd = binding.log.length;
// an update of the params after the end (an interactable-style delta: no statusChanges) queries
// only once the new props are final
await feed(delta("c1", [{ op: "replace", path: "/params/city", value: "Tok" }]));
const duringUpdate = binding.log.length;
await feed(end("c1", { resourceId: "weather.current", params: { city: "Tokyo" }, note: "Bring an umbrella" }));
await until(() => binding.get("c1")?.status === "ok" && binding.get("c1").params.city === "Tokyo", "c1 requery");

// c2: params the server refuses: the error is the component's result
await feed(start("c2"));
await feed(end("c2", { resourceId: "weather.current", params: { city: 7 } }));
await until(() => binding.get("c2")?.status === "error", "c2's error");
const c2 = binding.get("c2");

// c4: the end repeats the params with their keys in another order: the same query (canonical JSON)
await feed(start("c4", "Slow"));
await feed(delta("c4", [{ op: "add", path: "/resourceId", value: "test.slow" },
                        { op: "add", path: "/params", value: { ms: 1, tag: "reorder" } }],
                 { "/resourceId": "done" }));  // the params object is complete: implied done
await until(() => binding.get("c4")?.status === "ok", "c4's data");
await feed(end("c4", { params: { tag: "reorder", ms: 1 }, resourceId: "test.slow" }));
const c4Queries = binding.log.filter((e) => e.componentId === "c4").length;

// c3: a slow query superseded by a fast one; without aborting, the slow answer arrives last and is stale
const keep = mod.bindQuery(store, { url, headers, debounceMs: 0, abortSuperseded: false });
const aborting = binding;
store.apply(start("c3", "Slow"));
store.apply(delta("c3", [{ op: "add", path: "/resourceId", value: "test.slow" },
                         { op: "add", path: "/params", value: { ms: 600, tag: "old" } }],
                  { "/resourceId": "done" }));  // the params object is complete: implied done
await sleep(150); // both bindings' "old" queries are on the server
store.apply(end("c3", { resourceId: "test.slow", params: { tag: "new", ms: 10 } }));
await until(() => keep.log.some((e) => e.resourceId === "test.slow" && e.params.tag === "old" && e.status !== "loading"),
            "the old slow answer");
await until(() => aborting.get("c3")?.status === "ok", "the aborting binding's new answer");
const slowLog = (b) => b.log.filter((e) => e.componentId === "c3")
  .map((e) => ({ tag: e.params.tag, status: e.status, seq: e.seq }));
const result = {
  calls,
  binding: {
    seen, beforeDone, afterEnd, duringUpdate, c4Queries,
    c1First: { status: c1First.status, data: c1First.data, params: c1First.params, ms: c1First.ms },
    c1: { status: binding.get("c1").status, data: binding.get("c1").data },
    c2: { status: c2.status, error: outcome(c2.error) },
    keep: { result: { tag: keep.get("c3").data?.tag, status: keep.get("c3").status }, log: slowLog(keep) },
    aborting: { result: { tag: aborting.get("c3").data?.tag, status: aborting.get("c3").status },
                log: slowLog(aborting) },
    log: binding.log.map((e) => ({ componentId: e.componentId, resourceId: e.resourceId, params: e.params,
                                   status: e.status, httpStatus: e.httpStatus })),
    version: binding.version,
  },
};
binding.stop();
keep.stop();
process.stdout.write(JSON.stringify(result) + "\n");
