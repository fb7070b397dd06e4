// Parse each event of a JSON list (stdin) with @ag-ui/core 0.0.59's EventSchemas, as its
// HttpAgent does; prints [{index, type, issues}] for every event it rejects ([] when none).
import { EventSchemas } from "@ag-ui/core";

let text = "";
for await (const chunk of process.stdin) text += chunk;
const rejected = [];
JSON.parse(text).forEach((event, index) => {
  const parsed = EventSchemas.safeParse(event);
  if (!parsed.success) {
    rejected.push({ index, type: event.type, issues: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`) });
  }
});
process.stdout.write(JSON.stringify(rejected));
