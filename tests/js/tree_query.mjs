// bindQuery() on a render_ui tree (a `generative-ui` component) against a real agui-engine gateway.
// usage: node tree_query.mjs <agui-engine.js> <run url> <token>
// Prints one JSON object; tests/agui_engine/static/test_query_js.py asserts on it.
import { pathToFileURL } from "node:url";

const mod = await import(pathToFileURL(process.argv[2]).href);
const url = process.argv[3];
const headers = { Authorization: `Bearer ${process.argv[4]}` };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check, what, deadlineMs = 10_000) {
  const end = performance.now() + deadlineMs;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

const custom = (name, value) => ({ type: "CUSTOM", name, value });
const T = "tree-1";
const delta = (operations) => custom(mod.COMPONENT_PROPS_DELTA, { componentId: T, operations });
const card = (id, city, done) => ({ id, component: "WeatherCard", key: city.toLowerCase(),
                                    props: { resourceId: "weather.current", params: { city } }, children: [], done });
const store = new mod.ThreadStore();
const binding = mod.bindQuery(store, { url, headers, debounceMs: 20 });
const seen = []; // [log length] after each event
const feed = async (event) => {
  store.apply(event);
  await sleep(40); // longer than the debounce
  seen.push(binding.log.length);
};

await feed(custom(mod.COMPONENT_START, { messageId: "m1", componentId: T, componentName: mod.UI_SPEC_COMPONENT }));
await feed(delta([{ op: "add", path: "/root", value: [] }]));
await feed(delta([{ op: "add", path: "/root/-", value: { id: "0", component: "Stack", props: {}, children: [],
                                                         done: false } }]));
// the Tokyo card streams in: its params are incomplete until the node is done
await feed(delta([{ op: "add", path: "/root/0/children/-", value: card("0/0", "Tok", false) }]));
await feed(delta([{ op: "append", path: "/root/0/children/0/props/params/city", value: "yo" }]));
const beforeDone = binding.log.length;
await feed(delta([{ op: "replace", path: "/root/0/children/0/done", value: true }]));
await until(() => binding.get(T, "0/0")?.status === "ok", "Tokyo's data");
// other nodes and props change: no new query for the Tokyo card
await feed(delta([{ op: "add", path: "/root/0/props/gap", value: 12 }]));
await feed(delta([{ op: "add", path: "/root/0/children/-", value: card("0/1", "Paris", false) }]));
const beforeParis = binding.log.length;
await feed(delta([{ op: "replace", path: "/root/0/children/1/done", value: true }]));
await until(() => binding.get(T, "0/1")?.status === "ok", "Paris's data");
// the tree ends with the same params: nothing new
await feed(delta([{ op: "replace", path: "/root/0/done", value: true }]));
const rootDoc = JSON.parse(JSON.stringify(store.components.get(T).props));
await feed(custom(mod.COMPONENT_END, { componentId: T, finalProps: rootDoc }));
const afterEnd = binding.log.length;
// a node's params change (an update): that node alone is queried again
await feed(delta([{ op: "replace", path: "/root/0/children/1/props/params/city", value: "London" }]));
await until(() => binding.get(T, "0/1")?.data?.city === "London", "the re-query");
const result = {
  seen, beforeDone, beforeParis, afterEnd,
  tokyo: binding.get(T, "0/0"), paris: binding.get(T, "0/1"), whole: binding.get(T) ?? null,
  log: binding.log.map((e) => ({ componentId: e.componentId, nodeId: e.nodeId, params: e.params, status: e.status })),
};
binding.stop();
process.stdout.write(JSON.stringify(result) + "\n");
