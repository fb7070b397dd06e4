// CopilotKit's Node runtime (@copilotkit/runtime 1.75, its v2 API under Express) as a proxy in
// front of an AG-UI server: `node runtime.mjs PORT UPSTREAM_URL`. The contender of
// benchmarks/gateways/run.py named copilotkit-runtime; runs go to POST /agent/default/run.
import express from "express";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, createCopilotExpressHandler } from "@copilotkit/runtime/v2";

const [port, upstream] = process.argv.slice(2);
const runtime = new CopilotRuntime({ agents: { default: new HttpAgent({ url: upstream }) } });
const app = express();
app.use(createCopilotExpressHandler({ runtime, basePath: "/", activateChannels: false }));
app.listen(Number(port), "127.0.0.1");
