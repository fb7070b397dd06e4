// The shipped applier's runSSE against an agui-engine gateway: it drops its first connection after
// two events (as a network cut would), resumes with GET <url>/runs/<runId> + Last-Event-ID, and
// after `stopAfter` events in all aborts (the stop button), which DELETEs the run. Both requests
// must present the run key the POST was answered with (X-AGUI-Run-Key), or the gateway answers
// 404. usage: node run_sse_keyed.mjs <agui-engine.js> <url> <runId> <stopAfter> [headersJSON]
// Prints one JSON line: {resumes, seen, error}.
import { pathToFileURL } from "node:url";

const [modPath, url, runId, stopAfter, headersJson = "{}"] = process.argv.slice(2);
const mod = await import(pathToFileURL(modPath).href);
const store = new mod.ThreadStore();
const controller = new AbortController();
const seen = [];
let readers = 0;
let resumes = 0;
let error = null;
const input = { threadId: "t-keyed", runId, messages: [{ id: "u1", role: "user", content: "hi" }], tools: [], context: [], state: null, forwardedProps: null };
const deadline = setTimeout(() => {
  console.log(JSON.stringify({ error: "timed out", seen, resumes }));
  process.exit(3);
}, 20000);
try {
  await mod.runSSE(url, input, store, {
    headers: JSON.parse(headersJson),
    signal: controller.signal,
    onReader(reader) {
      readers += 1;
      if (readers === 1) this.first = reader;
    },
    onFrame({ event, id }) {
      seen.push(id);
      if (seen.length === 2 && this.first) {
        const reader = this.first;
        this.first = null;
        reader.cancel(); // a dropped connection: runSSE resumes it
      }
      if (seen.length === Number(stopAfter)) controller.abort();
    },
    onResume() {
      resumes += 1;
    },
  });
} catch (err) {
  error = String(err && err.name ? err.name : err);
}
clearTimeout(deadline);
// let the DELETE that the abort sent reach the server before exiting
await new Promise((resolve) => setTimeout(resolve, 300));
console.log(JSON.stringify({ resumes, seen, error }));
