// A run through the real @ag-ui/client HttpAgent against an agui-engine gateway, over SSE or, with
// "proto", over the binary encoding: HttpAgent always sends Accept: text/event-stream, so the proto
// run uses a subclass whose requestInit asks for application/vnd.ag-ui.event+proto (as the AG-UI
// docs say a client does). usage: node http_agent_proto.mjs <url> <message> <sse|proto>
// Prints one JSON line: {contentType, types, messages, state, error}.
import { HttpAgent } from "@ag-ui/client";

const [url, message, mode] = process.argv.slice(2);
const PROTO = "application/vnd.ag-ui.event+proto";
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "1";

class ProtoHttpAgent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    return { ...init, headers: { ...init.headers, Accept: PROTO } };
  }
}

let contentType = null;
const fetchRecording = async (input, init) => {
  const response = await fetch(input, init);
  contentType = response.headers.get("content-type");
  return response;
};
const Agent = mode === "proto" ? ProtoHttpAgent : HttpAgent;
const agent = new Agent({ url, threadId: "t-proto", fetch: fetchRecording });
agent.addMessage({ id: "u1", role: "user", content: message });
const types = [];
let error = null;
try {
  await agent.runAgent({ runId: `r-${mode}` }, { onEvent: ({ event }) => types.push(event.type) });
} catch (err) {
  error = String(err && err.message ? err.message : err);
}
process.stdout.write(JSON.stringify({ contentType, types, messages: agent.messages, state: agent.state, error }) + "\n");
