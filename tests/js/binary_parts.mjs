// The official client's upgrade of 0.x "binary" content parts: the RunAgentInput on stdin
// goes through @ag-ui/client's CompatibilityBoundary (the always-on middleware that upgrades
// legacy parts before a request is sent); prints the messages the agent behind it receives.
import { CompatibilityBoundary } from "@ag-ui/client";
import { EMPTY } from "rxjs";
import { readFileSync } from "node:fs";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const input = JSON.parse(readFileSync(0, "utf8"));
let seen = null;
const next = { run(upgraded) { seen = upgraded; return EMPTY; }, messages: [], state: {} };
new CompatibilityBoundary().run(input, next).subscribe({});
process.stdout.write(JSON.stringify(seen.messages));
