// Apply recorded AG-UI events with the shipped applier; one JSON line per event out.
// usage: node apply.mjs <path to agui-engine.js>  < events.ndjson
// Each line: {"props": {componentId: props}, "findings": n, "status": {...}} after that event.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const mod = await import(pathToFileURL(process.argv[2]).href);
const store = new mod.ThreadStore();
const lines = readFileSync(0, "utf8").split("\n").filter((l) => l.trim());
const out = [];
for (const line of lines) {
  store.apply(JSON.parse(line));
  const status = {};
  for (const [id, c] of store.components) status[id] = c.propsStatus;
  out.push(JSON.stringify({ props: store.propsById(), findings: store.findings, status }));
}
const finals = {};
for (const [id, c] of store.components) {
  finals[id] = { finalProps: c.finalProps, streamingState: c.streamingState, propsStatus: c.propsStatus,
                 statusMessage: c.statusMessage ?? null, completionStatusMessage: c.completionStatusMessage ?? null };
}
out.push(JSON.stringify({ components: finals, messages: store.messages, state: store.state, runs: store.runs }));
process.stdout.write(out.join("\n") + "\n");
