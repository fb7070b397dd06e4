// agui-engine.js's thread API against a real agui-engine gateway with a durable store: list the
// caller's threads in pages, rename one, delete another, and what another principal gets.
// usage: node thread_list.mjs <agui-engine.js> <url> <alice token> <bob token>
// Prints one JSON line: {first, second, renamed, after, bob, foreign}.
import { pathToFileURL } from "node:url";

const [modPath, url, alice, bob] = process.argv.slice(2);
const mod = await import(pathToFileURL(modPath).href);
const as = (token) => ({ headers: { Authorization: `Bearer ${token}` } });
const ids = (page) => page.threads.map((t) => t.threadId);

const first = await mod.listThreads(url, { ...as(alice), limit: 1 });
const second = await mod.listThreads(url, { ...as(alice), limit: 1, cursor: first.nextCursor });
const renamed = await mod.renameThread(url, "js-a", "  Renamed   in JS ", as(alice));
await mod.deleteThread(url, "js-b", as(alice));
const after = await mod.listThreads(url, { ...as(alice), search: "renamed" });
const bob_ = await mod.listThreads(url, as(bob));
let foreign = null;
try {
  await mod.deleteThread(url, "js-a", as(bob));
} catch (err) {
  foreign = { status: err.status, code: err.code };
}
console.log(JSON.stringify({
  first: ids(first), second: ids(second), last: second.nextCursor, renamed,
  after: after.threads.map((t) => [t.threadId, t.title]), bob: ids(bob_), foreign,
}));
