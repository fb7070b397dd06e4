// A live run through the real @ag-ui/client HttpAgent against an agui-engine gateway, the shipped
// applier subscribed to the agent. usage: node live.mjs <agui-engine.js> <url> <message>
// One JSON line per event as the client delivered it: {"event": ..., "props": {componentId: props}}.
import { HttpAgent } from "@ag-ui/client";
import { pathToFileURL } from "node:url";

const mod = await import(pathToFileURL(process.argv[2]).href);
const agent = new HttpAgent({ url: process.argv[3], threadId: "t-live" });
agent.addMessage({ id: "u1", role: "user", content: process.argv[4] });
const store = new mod.ThreadStore();
const lines = [];
mod.connectAgent(agent, store);
store.subscribe((s, event) => {
  lines.push(JSON.stringify({ event, props: s.propsById(), findings: s.findings.length }));
});
await agent.runAgent({ runId: "r-live" });
process.stdout.write(lines.join("\n") + "\n");
