// CopilotKit's Node runtime (@copilotkit/runtime 1.75, its v2 API under Express) as a proxy in
// front of AG-UI servers:
//
//   node runtime.mjs PORT UPSTREAM_URL [ID=URL ...] [--a2ui | --a2ui-bare] [--ready]
//
// UPSTREAM_URL is the agent `default`; each ID=URL adds an agent of that id (an HttpAgent at
// URL). --a2ui switches on the runtime's A2UI middleware with its own render_a2ui tool
// (CopilotRuntime's `a2ui: {injectA2UITool: true}`, what the runtime also does when the page
// brings an A2UI catalog): the middleware draws the surfaces, the gateway sees its tool in the
// run and leaves A2UI to it (spec/a2ui.md, "A2UI applied once"). --a2ui-bare switches it on bare
// (`a2ui: {}`, no tool of its own): it then paints the upstream's own render_a2ui calls and
// nothing in the run tells a gateway so (spec/a2ui.md, "Behind a bare a2ui switch"). --ready prints one line `READY <port>` on stdout
// once the port listens. CORS is the handler's default (any origin), so a page on another
// origin can use it. CopilotKit's telemetry is off unless COPILOTKIT_TELEMETRY_DISABLED says
// otherwise (it would call out to the network).
//
// Used by benchmarks/gateways/run.py (the contender named copilotkit-runtime: runs go to
// POST /agent/default/run) and by tests/transports/test_copilotkit_page.py (CopilotKit's v2
// chat through CopilotRuntime, in Chromium).
import express from "express";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, createCopilotExpressHandler } from "@copilotkit/runtime/v2";

process.env.COPILOTKIT_TELEMETRY_DISABLED ??= "true";
const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a.startsWith("--")));
const [port, upstream, ...named] = args.filter((a) => !a.startsWith("--"));
const agents = { default: new HttpAgent({ url: upstream }) };
for (const pair of named) {
  const at = pair.indexOf("=");
  if (at <= 0) {
    console.error(`runtime.mjs: ${pair}: write ID=URL`);
    process.exit(2);
  }
  agents[pair.slice(0, at)] = new HttpAgent({ url: pair.slice(at + 1) });
}
const a2ui = flags.has("--a2ui") ? { a2ui: { injectA2UITool: true } } : flags.has("--a2ui-bare") ? { a2ui: {} } : {};
const runtime = new CopilotRuntime({ agents, ...a2ui });
const app = express();
app.use(createCopilotExpressHandler({ runtime, basePath: "/", activateChannels: false }));
const server = app.listen(Number(port), "127.0.0.1", () => {
  if (flags.has("--ready")) console.log(`READY ${server.address().port}`);
});
