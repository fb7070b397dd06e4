// The real @ag-ui/mcp-apps-middleware 0.1.1 around a scripted inner agent, on an MCP server.
// Reads {servers: [{type, url, serverId?}], call?: {name, arguments}, proxied?: [request...]} on stdin;
// prints {hashes, run?: {events, error, toolsOffered}, proxied: [{events, error}...]}
// (toolsOffered: the tools the inner agent was given, {name, description, parameters}):
//  * hashes: getServerHash of each server (no connection is made for them);
//  * run: one agent run whose inner agent calls the tool `call.name` with `call.arguments`
//    (RUN_STARTED, TOOL_CALL_START/ARGS/END, RUN_FINISHED) and leaves the call for the middleware;
//  * proxied: one run per request, forwardedProps.__proxiedMCPRequest = the request.
import { AbstractAgent, EventType } from "@ag-ui/client";
import { MCPAppsMiddleware, getServerHash } from "@ag-ui/mcp-apps-middleware";
import { Observable } from "rxjs";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));

class ScriptedAgent extends AbstractAgent {
  constructor(call) {
    super({ threadId: "thread-1" });
    this.call = call;
    this.toolsOffered = [];
  }
  run(input) {
    this.toolsOffered = input.tools;
    const call = this.call;
    return new Observable((subscriber) => {
      const base = { threadId: input.threadId, runId: input.runId };
      subscriber.next({ type: EventType.RUN_STARTED, ...base });
      subscriber.next({ type: EventType.TOOL_CALL_START, toolCallId: "call-1", toolCallName: call.name });
      subscriber.next({ type: EventType.TOOL_CALL_ARGS, toolCallId: "call-1", delta: JSON.stringify(call.arguments) });
      subscriber.next({ type: EventType.TOOL_CALL_END, toolCallId: "call-1" });
      subscriber.next({ type: EventType.RUN_FINISHED, ...base });
      subscriber.complete();
    });
  }
}

async function runOnce(forwardedProps, runId) {
  const agent = new ScriptedAgent(request.call);
  agent.use(new MCPAppsMiddleware({ mcpServers: request.servers }));
  agent.addMessage({ id: "u1", role: "user", content: "show it" });
  const events = [];
  let error = null;
  try {
    await agent.runAgent({ runId, forwardedProps }, { onEvent: ({ event }) => { events.push(event); } });
  } catch (err) {
    error = String(err && err.message ? err.message : err);
  }
  return { events, error, toolsOffered: agent.toolsOffered };
}

const out = { hashes: request.servers.map((s) => getServerHash(s)) };
if (request.call) out.run = await runOnce({}, "run-1");
out.proxied = [];
let n = 0;
for (const proxied of request.proxied || []) {
  n += 1;
  out.proxied.push(await runOnce({ __proxiedMCPRequest: proxied }, `proxy-${n}`));
}
process.stdout.write(JSON.stringify(out));
