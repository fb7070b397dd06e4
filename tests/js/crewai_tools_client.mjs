// Drives a served CrewAI crew with the real @ag-ui/client HttpAgent: one run, whose model calls
// two tools in one message. Prints one JSON document: {runs: [{events, error}], messages} -- the
// messages as the client assembled them from the events (tool calls with their arguments).
// Usage: node crewai_tools_client.mjs URL
import { HttpAgent } from "@ag-ui/client";

const agent = new HttpAgent({ url: process.argv[2], threadId: "js-crew-tools" });
const record = { events: [], error: null };
agent.addMessage({ id: "js-user-1", role: "user", content: "kestrels, and the weather in Oslo" });
try {
  await agent.runAgent({ runId: "js-crew-tools-1" }, { onEvent: ({ event }) => { record.events.push(event); } });
} catch (err) {
  record.error = String(err && err.message ? err.message : err);
}
process.stdout.write(JSON.stringify({ runs: [record], messages: agent.messages }));
