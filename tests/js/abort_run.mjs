// Runs one AG-UI run with the official @ag-ui/client HttpAgent and presses "stop"
// (abortRun()) once the first text delta has arrived, the way a chat UI's stop
// button does. Prints one JSON line: the wall-clock time (ms since the epoch,
// sub-millisecond) at which abortRun() was called, the events seen before it,
// and how the run ended on the client side.
//
//   node abort_run.mjs <url> <runId> [abortAfterDeltas] [headersJSON]
import { HttpAgent } from "@ag-ui/client";

const [url, runId, after = "1", headersJson = "{}"] = process.argv.slice(2);
const abortAfter = Number(after);
const agent = new HttpAgent({ url, headers: JSON.parse(headersJson), initialMessages: [{ id: "u1", role: "user", content: "Tell me a long story." }] });
const seen = [];
let deltas = 0;
let abortedAt = null;
let failed = null;

const deadline = setTimeout(() => {
  console.log(JSON.stringify({ error: "no text delta within 20 s", seen }));
  process.exit(3);
}, 20000);

try {
  await agent.runAgent(
    { runId },
    {
      onEvent({ event }) {
        seen.push(event.type);
      },
      onTextMessageContentEvent() {
        deltas += 1;
        if (deltas === abortAfter && abortedAt === null) {
          abortedAt = performance.timeOrigin + performance.now();
          agent.abortRun();
        }
      },
      onRunFailed({ error }) {
        failed = String(error && error.name ? error.name : error);
      },
    },
  );
} catch (error) {
  failed = String(error && error.name ? error.name : error);
}
clearTimeout(deadline);
console.log(JSON.stringify({ abortedAt, seen, failed }));
