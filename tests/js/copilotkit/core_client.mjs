// CopilotKit's own runtime client, @copilotkit/core 1.74 (what @copilotkit/react-core runs in the
// page), pointed at a gateway as its runtimeUrl: GET /info, then POST /agent/<id>/run with a
// frontend tool whose handler runs and whose result continues the run (a second run), as the chat
// does. Usage: node core_client.mjs RUNTIME_URL AGENT_ID [TOKEN]; with CK_TRANSPORT=single the core
// uses the runtime's single-endpoint form (what the page's `useSingleEndpoint` selects).
// Prints {status, agents, handled, messages, errors, requests} (requests: "METHOD URL" of every fetch).
import { z } from "zod";

// The core connects to its runtime only in a browser (`typeof window`): node stands in for one.
globalThis.window ??= globalThis;
const { CopilotKitCore } = await import("@copilotkit/core");

const [runtimeUrl, agentId, token] = process.argv.slice(2);
const requests = [];
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  requests.push(`${(init && init.method) || "GET"} ${typeof input === "string" ? input : input.url}`);
  return realFetch(input, init);
};
const errors = [];
const handled = [];
const core = new CopilotKitCore({
  runtimeUrl,
  ...(process.env.CK_TRANSPORT ? { runtimeTransport: process.env.CK_TRANSPORT } : {}),
  headers: token ? { Authorization: `Bearer ${token}` } : {},
  tools: [{
    name: "confirm_booking",
    description: "Ask the user to confirm a booking",
    parameters: z.object({ guests: z.number() }),
    handler: async ({ guests }) => { const r = `confirmed for ${guests} guests`; handled.push(r); return r; },
  }],
});
core.subscribe({ onError: ({ error, code }) => { errors.push(`${code}: ${error && error.message}`); } });
const deadline = Date.now() + 30000;
while (!core.getAgent(agentId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
const agent = core.getAgent(agentId);
const out = { status: core.runtimeConnectionStatus, agents: Object.keys(core.agents ?? {}), handled, errors, requests };
if (agent) {
  agent.addMessage({ id: "u1", role: "user", content: "book a table for 4" });
  try {
    await core.runAgent({ agent });
  } catch (err) {
    errors.push(`runAgent: ${err && err.message ? err.message : err}`);
  }
  out.messages = agent.messages;
}
process.stdout.write(JSON.stringify(out));
process.exit(0);
