// One agui-engine.js restoreThread against a server, for the bad-answer tests of
// tests/transports/test_history.py. usage: node restore_one.mjs <agui-engine.js> <url> <threadId>
// Prints one JSON line: {messages} when it restored, else {error: {name, status, code, message}}.
import { pathToFileURL } from "node:url";

const [modPath, url, threadId] = process.argv.slice(2);
const mod = await import(pathToFileURL(modPath).href);
let report;
try {
  const { store } = await mod.restoreThread(url, threadId, { runKey: "k" });
  report = { messages: store.messages };
} catch (err) {
  report = { error: { name: err.name, status: err.status ?? null, code: err.code ?? null, message: String(err.message) } };
}
process.stdout.write(JSON.stringify(report) + "\n");
