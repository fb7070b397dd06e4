// Runs the official @ag-ui/a2ui-middleware 0.0.10 around a scripted inner agent that replays
// recorded events, and prints what the middleware emits (the oracle of tests/agui_engine/genui/test_a2ui.py).
// stdin: {"cases": [{"input": RunAgentInput, "events": [event, ...], "config": {...}}]}
// stdout: {"results": [{"events": [...], "error": null | str, "ms": float}]}
// With "direct": true a case feeds the middleware's processStream itself (no client state
// machinery, no per-event macrotask), which is what the benchmark times.
import { A2UIMiddleware } from "@ag-ui/a2ui-middleware";
import { AbstractAgent } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));

// A real AbstractAgent: the middleware's client-side state (the messages it finds pending tool
// calls in) is built by the client's own apply pipeline, which needs one.
class ScriptedAgent extends AbstractAgent {
  constructor(events) {
    super();
    this.events = events;
  }
  run() {
    return from(this.events.map((e) => ({ ...e })));
  }
}

function scripted(events) {
  return new ScriptedAgent(events);
}

async function runCase(c) {
  const middleware = new A2UIMiddleware(c.config || {});
  const started = process.hrtime.bigint();
  try {
    let events;
    if (c.direct) {
      const source = from(c.events.map((e) => ({ event: e, messages: c.input.messages || [] })));
      events = await lastValueFrom(middleware.processStream(source, undefined).pipe(toArray()));
    } else {
      events = await lastValueFrom(middleware.run(c.input, scripted(c.events)).pipe(toArray()));
    }
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (c.summary) {
      // the benchmark's figures: bytes and count of the activity events, not the events themselves
      const activity = events.filter((e) => e.type === "ACTIVITY_SNAPSHOT" || e.type === "ACTIVITY_DELTA");
      const bytes = activity.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)), 0);
      const last = activity.length ? activity[activity.length - 1].content : null;
      return { events: [], activityBytes: bytes, activityEvents: activity.length, last, error: null, ms };
    }
    return { events, error: null, ms };
  } catch (err) {
    return { events: [], error: String(err && err.message ? err.message : err), ms: 0 };
  }
}

const results = [];
for (const c of request.cases) {
  const repeat = c.repeat || 1;
  let result;
  let best = Infinity;
  for (let i = 0; i < repeat; i++) {
    result = await runCase(c);
    best = Math.min(best, result.ms);
  }
  result.ms = best;
  results.push(result);
}
process.stdout.write(JSON.stringify({ results }));
