// The official @ag-ui/a2ui-middleware on the client side, in front of an agui-engine gateway that applies
// A2UI itself (`serve --a2ui`), as CopilotKit's runtime does with its `a2ui` switch on: a real
// @ag-ui/client HttpAgent with `agent.use(new A2UIMiddleware({injectA2UITool: true}))`. Two runs of the
// same thread; what the client receives is printed.
// Usage: node a2ui_client_middleware.mjs URL THREAD_ID MESSAGE
// Prints {runs: [{events, error}], warnings}: `warnings` are the client's console warnings (the
// "Failed to apply activity patch" of a surface written twice).
import { A2UIMiddleware } from "@ag-ui/a2ui-middleware";
import { HttpAgent } from "@ag-ui/client";

const [url, threadId, message] = process.argv.slice(2);
const warnings = [];
const warn = console.warn;
console.warn = (...args) => { warnings.push(args.map(String).join(" ")); };
const agent = new HttpAgent({ url, threadId });
agent.use(new A2UIMiddleware({ injectA2UITool: true }));
const runs = [];
for (let n = 1; n <= 2; n++) {
  agent.addMessage({ id: `u${n}`, role: "user", content: message });
  const events = [];
  let error = null;
  try {
    await agent.runAgent({ runId: `${threadId}-run-${n}` }, { onEvent: ({ event }) => { events.push(event); } });
  } catch (err) {
    error = String(err && err.message ? err.message : err);
  }
  runs.push({ events, error });
}
console.warn = warn;
process.stdout.write(JSON.stringify({ runs, warnings }));
