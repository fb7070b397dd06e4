// agui-engine.js against a real agui-engine gateway: two runs of one thread with runSSE (the second
// presents the first's run key, so the gateway keeps it in the thread's history), then
// restoreThread into a fresh ThreadStore, and a restore of a thread that does not exist.
// usage: node restore_thread.mjs <agui-engine.js> <url>
// Prints one JSON line: {live, restored, runId, trimmed, events, unknown}.
import { pathToFileURL } from "node:url";

const [modPath, url] = process.argv.slice(2);
const mod = await import(pathToFileURL(modPath).href);
const live = new mod.ThreadStore();
const deadline = setTimeout(() => {
  console.log(JSON.stringify({ error: "timed out" }));
  process.exit(3);
}, 30000);

function input(runId, text, parentRunId) {
  return {
    threadId: "js-thread", runId, ...(parentRunId ? { parentRunId } : {}),
    messages: [...live.messages, { id: `${runId}-u`, role: "user", content: text }],
    state: live.state, tools: [], context: [], forwardedProps: {},
  };
}

// what a chat front end does: the user's message joins the store, then the run
function send(runId, text, hooks, parentRunId) {
  const body = input(runId, text, parentRunId);
  live.apply({ type: "MESSAGES_SNAPSHOT", messages: body.messages });
  return mod.runSSE(url, body, live, hooks);
}

live.state = { turns: [] };
const first = await send("js-1", "hi", {});
await send("js-2", "more", { runKey: first.runKey }, "js-1");
// a run is kept before its stream ends: the first restore already holds both runs
const restored = await mod.restoreThread(url, "js-thread", { runKey: first.runKey });
let unknown = null;
try {
  await mod.ThreadStore.restore(url, "no-such-thread", { runKey: first.runKey });
} catch (err) {
  unknown = { status: err.status, code: err.code };
}
clearTimeout(deadline);
const view = (store) => ({ messages: store.messages, state: store.state });
console.log(JSON.stringify({
  live: view(live), restored: view(restored.store), runId: restored.runId, trimmed: restored.trimmed,
  events: restored.events, unknown,
}));
