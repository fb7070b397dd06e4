// The official @ag-ui/proto codec as a filter, for the differential tests of agui_engine.protocol.proto.
// stdin: {"encode": [event, ...], "decode": ["<hex>", ...]}
// stdout: {"encoded": ["<hex>" | {"error": msg}, ...], "decoded": [event | {"error": msg}, ...]}
import { encode, decode } from "@ag-ui/proto";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "1";
console.warn = () => {};
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const attempt = (fn) => {
  try {
    return fn();
  } catch (err) {
    return { error: String(err && err.message ? err.message : err) };
  }
};
const encoded = (request.encode ?? []).map((event) =>
  attempt(() => Buffer.from(encode(event)).toString("hex")),
);
const decoded = (request.decode ?? []).map((hex) => attempt(() => decode(Buffer.from(hex, "hex"))));
process.stdout.write(JSON.stringify({ encoded, decoded }));
