// One run of the real @ag-ui/client HttpAgent against URL with one user message; prints
// {events, messages, error}. Usage: node remote_client.mjs URL THREAD_ID "message"
import { HttpAgent } from "@ag-ui/client";

const [url, threadId, text] = process.argv.slice(2);
const agent = new HttpAgent({ url, threadId });
agent.addMessage({ id: "u1", role: "user", content: text });
const events = [];
let error = null;
try {
  await agent.runAgent({ runId: "js-run-1" }, { onEvent: ({ event }) => { events.push(event); } });
} catch (err) {
  error = String(err && err.message ? err.message : err);
}
process.stdout.write(JSON.stringify({ events, messages: agent.messages, error }));
