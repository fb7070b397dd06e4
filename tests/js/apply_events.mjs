// Applies AG-UI threads with the real @ag-ui/client 1.0 and prints what it accumulates, for the
// differential test of the Python Accumulator. Reads NDJSON on stdin: one line per thread, a JSON
// array of wire events. Each thread goes through the client's own pipeline stages, in the order
// AbstractAgent.runAgent uses them: transformChunks -> verifyEvents -> defaultApplyEvents. Prints
// one JSON line per thread: {messages, state, pendingInterrupts, error}. With --no-verify the
// verifyEvents stage is left out (what the applier alone makes of a stream the verifier refuses).
// Usage: node apply_events.mjs [--no-verify] < threads.ndjson
import { createInterface } from "node:readline";
import { defaultApplyEvents, transformChunks, verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom } from "rxjs";
import { tap, defaultIfEmpty } from "rxjs/operators";

const verify = !process.argv.includes("--no-verify");
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {}; // the client warns on tolerated input; stdout carries only results

async function applyThread(events) {
  const agent = { messages: [], state: {}, pendingInterrupts: [] };
  const input = { threadId: "t", runId: "r", state: {}, messages: [], tools: [], context: [], forwardedProps: {} };
  let messages = [];
  let state = {};
  let error = null;
  try {
    const applied = defaultApplyEvents(
      input,
      verify ? from(events).pipe(transformChunks(undefined), verifyEvents(undefined))
             : from(events).pipe(transformChunks(undefined)),
      agent,
      [],
    );
    await lastValueFrom(
      applied.pipe(
        tap((update) => {
          if (update.messages !== undefined) messages = update.messages;
          if (update.state !== undefined) state = update.state;
        }),
        defaultIfEmpty(null),
      ),
    );
  } catch (err) {
    error = String(err && err.message ? err.message : err);
  }
  return { messages, state, pendingInterrupts: agent.pendingInterrupts, error };
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  process.stdout.write(JSON.stringify(await applyThread(JSON.parse(line))) + "\n");
}
