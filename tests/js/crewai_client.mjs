// Drives a served CrewAI crew with the real @ag-ui/client HttpAgent: one run, every event
// recorded with the client's own clock at the moment it arrived, so the test can tell a
// live stream from a buffered one. Prints one JSON document: {events: [...], at: [ms...],
// error}. Usage: node crewai_client.mjs URL
import { HttpAgent } from "@ag-ui/client";

const url = process.argv[2];
const agent = new HttpAgent({ url, threadId: "js-crew" });
agent.addMessage({ id: "js-user-1", role: "user", content: "Paris" });
const events = [];
const at = [];
let error = null;
try {
  await agent.runAgent({ runId: "js-crew-run" }, {
    onEvent: ({ event }) => { events.push(event); at.push(performance.now()); },
  });
} catch (err) {
  error = String(err && err.message ? err.message : err);
}
process.stdout.write(JSON.stringify({ events, at, error }));
