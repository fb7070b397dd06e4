// Drives a served CrewAI target with the real @ag-ui/client HttpAgent, one conversation: a
// crew (every event recorded with the client's own clock at the moment it arrived, so the test
// can tell a live stream from a buffered one), then a review the flow pauses for and the
// client's answer to it. Prints one JSON document: {runs: [{events, at, error}], messages}.
// Usage: node crewai_client.mjs URL
import { HttpAgent } from "@ag-ui/client";

const url = process.argv[2];
const agent = new HttpAgent({ url, threadId: "js-crew" });
const runs = [];
let n = 0;

async function run(params = {}) {
  const record = { events: [], at: [], error: null };
  runs.push(record);
  n += 1;
  try {
    await agent.runAgent({ runId: `js-crew-run-${n}`, ...params }, {
      onEvent: ({ event }) => { record.events.push(event); record.at.push(performance.now()); },
    });
  } catch (err) {
    record.error = String(err && err.message ? err.message : err);
  }
  return record.events;
}

agent.addMessage({ id: "js-user-1", role: "user", content: "Paris" });
await run();
agent.addMessage({ id: "js-user-2", role: "user", content: "review a post about cats" });
const asked = await run();
const finished = asked.find((e) => e.type === "RUN_FINISHED");
const interrupts = (finished && finished.outcome && finished.outcome.interrupts) || [];
await run({ resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: "ship it" })) });
process.stdout.write(JSON.stringify({ runs, messages: agent.messages }));
