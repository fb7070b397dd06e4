// A frontend tool round trip with a real @ag-ui/client HttpAgent, as CopilotKit and assistant-ui's
// react-ag-ui drive it: run 1 offers the tool, the agent calls it and the run ends waiting for it;
// the page's handler runs, its result is added as a tool message, run 2 continues.
// Usage: node frontend_tool.mjs URL THREAD_ID CLIENT_DIR, CLIENT_DIR the folder whose node_modules
// hold the client (tests/js: 1.0; tests/js/v0: 0.0.59, what CopilotKit 1.74 pins).
// Prints {version, runs: [{events, error}], messages, handled}.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [url, threadId, clientDir] = process.argv.slice(2);
const pkg = join(clientDir, "node_modules", "@ag-ui", "client");
const version = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).version;
const { HttpAgent } = await import(pathToFileURL(join(pkg, "dist", "index.mjs")).href);
const tool = {
  name: "confirm_booking",
  description: "Ask the user to confirm a booking",
  parameters: { type: "object", properties: { guests: { type: "number" } }, required: ["guests"] },
};
const handler = (args) => `confirmed for ${args.guests} guests`;
const agent = new HttpAgent({ url, threadId });
agent.addMessage({ id: "u1", role: "user", content: "book a table for 4" });
const runs = [];
const handled = [];
for (let n = 1; n <= 2; n++) {
  const events = [];
  let error = null;
  try {
    await agent.runAgent({ runId: `${threadId}-run-${n}`, tools: [tool] }, { onEvent: ({ event }) => { events.push(event); } });
  } catch (err) {
    error = String(err && err.message ? err.message : err);
  }
  runs.push({ events, error });
  if (error) break;
  // what CopilotKit does after a run: every call of a frontend tool without a result runs its handler
  const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  const open = agent.messages.flatMap((m) => m.toolCalls ?? []).filter((c) => c.function.name === tool.name && !answered.has(c.id));
  if (open.length === 0) break;
  for (const call of open) {
    const result = handler(JSON.parse(call.function.arguments));
    handled.push(result);
    agent.addMessage({ id: `result-${call.id}`, role: "tool", toolCallId: call.id, content: result });
  }
}
process.stdout.write(JSON.stringify({ version, runs, messages: agent.messages, handled }));
