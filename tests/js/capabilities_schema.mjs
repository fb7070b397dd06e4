// @ag-ui/core's AgentCapabilitiesSchema (zod) as a filter, for the differential tests of
// agui_engine.protocol.capabilities.
// stdin: [document, ...]   stdout: [{"ok": parsed} | {"error": issues}, ...]
import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const documents = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const results = documents.map((doc) => {
  const parsed = AgentCapabilitiesSchema.safeParse(doc);
  return parsed.success
    ? { ok: parsed.data }
    : { error: parsed.error.issues.map((i) => ({ path: i.path, message: i.message })) };
});
process.stdout.write(JSON.stringify(results));
