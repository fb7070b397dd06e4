// One run of the real @ag-ui/client HttpAgent against URL with headers (JSON) and one user
// message; prints {events, messages, error}.
// Usage: node http_agent_headers.mjs URL THREAD_ID RUN_ID HEADERS_JSON "message"
import { HttpAgent } from "@ag-ui/client";

const [url, threadId, runId, headersJson, text] = process.argv.slice(2);
const agent = new HttpAgent({ url, threadId, headers: JSON.parse(headersJson) });
agent.addMessage({ id: "u1", role: "user", content: text });
const events = [];
let error = null;
try {
  await agent.runAgent({ runId }, { onEvent: ({ event }) => { events.push(event); } });
} catch (err) {
  error = String(err && err.message ? err.message : err);
}
process.stdout.write(JSON.stringify({ events, messages: agent.messages, error }));
