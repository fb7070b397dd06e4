// agui-engine.js's activities and A2UI user actions under node, for tests/agui_engine/static/test_agui_engine_a2ui_js.py.
// Usage: node a2ui_store.mjs <path of agui-engine.js> < {"events": [...wire events], "action": {...} | null}
// Prints one JSON object: the store's activity messages (in message order), its findings, and, when an
// action is given, the RunAgentInput a2uiActionInput builds and what the real @ag-ui/a2ui-middleware 0.0.10's
// processUserAction makes of it (the messages it appends).
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { A2UIMiddleware } from "@ag-ui/a2ui-middleware";

const engine = await import(pathToFileURL(process.argv[2]).href);
const { events, action } = JSON.parse(readFileSync(0, "utf8"));
const store = new engine.ThreadStore();
store.applyAll(events);
const activities = store.messages.filter((m) => m.role === "activity")
  .map(({ id, role, activityType, content }) => ({ id, role, activityType, content }));
const surfaces = [...store.activities.values()].map((r) => engine.a2uiContent(r));
const out = { activities, surfaces, findings: store.findings.map((f) => f.kind), history: store.history() };
if (action) {
  const input = engine.a2uiActionInput(store, action, { threadId: "t", runId: "r2" });
  out.input = input;
  out.processed = new A2UIMiddleware().processUserAction(input).messages.slice(input.messages.length);
}
process.stdout.write(JSON.stringify(out) + "\n");
