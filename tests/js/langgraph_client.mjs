// Drives a served LangGraph graph with the real @ag-ui/client HttpAgent, one conversation:
// text, a server tool, a component the client offers (its props filling in), the turn after
// it, an interrupt and its answer. Prints one JSON document:
// {runs: [{events: [...], error}], messages: [...]}. Usage: node langgraph_client.mjs URL
import { HttpAgent } from "@ag-ui/client";

const url = process.argv[2];
const agent = new HttpAgent({ url, threadId: "js-thread" });
const card = {
  name: "show_component_WeatherCard",
  description: "Shows the weather of one city.",
  parameters: { type: "object", properties: { city: { type: "string" }, tempC: { type: "number" } } },
};
const runs = [];
let n = 0;

async function run(params = {}) {
  const events = [];
  const record = { events, error: null };
  runs.push(record);
  n += 1;
  try {
    await agent.runAgent({ runId: `js-run-${n}`, ...params }, { onEvent: ({ event }) => { events.push(event); } });
  } catch (err) {
    record.error = String(err && err.message ? err.message : err);
  }
  return events;
}

function say(text) {
  agent.addMessage({ id: `js-user-${n + 1}`, role: "user", content: text });
}

say("hello");
await run();
say("what is the weather in Paris?");
await run();
say("show me a card for Oslo");
await run({ tools: [card] });
say("thanks, and now?");
await run({ tools: [card] });
say("please approve the plan");
const asked = await run();
const interrupt = asked.find((e) => e.type === "RUN_FINISHED");
const interrupts = (interrupt && interrupt.outcome && interrupt.outcome.interrupts) || [];
await run({ resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { ok: true } })) });
process.stdout.write(JSON.stringify({ runs, messages: agent.messages }));
