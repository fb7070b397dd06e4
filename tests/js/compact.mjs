// @ag-ui/client 1.0.0's compactEvents as a filter, for the differential tests of
// agui_engine.protocol.compact. Reads NDJSON on stdin, one thread a line (a JSON array of wire
// events), and prints one line a thread as soon as it is read: {"events": [...]} or
// {"error": msg}. Line by line, so that one process serves a whole test session.
// With --bench N R: reads ONE line, compacts it N times, R times over (after a warm-up), and prints
// {"seconds": [the R totals of CPU time, user + system, process.cpuUsage], "events": [...]}.
// Usage: node compact.mjs [--bench N R] < threads.ndjson
import { createInterface } from "node:readline";
import { compactEvents } from "@ag-ui/client";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {}; // a patch that does not apply is warned about; stdout carries only results

const bench = process.argv.indexOf("--bench");
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const thread = JSON.parse(line);
  if (bench >= 0) {
    const rounds = Number(process.argv[bench + 1]);
    const repeats = Number(process.argv[bench + 2] ?? 1);
    let events = compactEvents(thread);
    for (let i = 0; i < rounds; i++) events = compactEvents(thread); // warm-up: let the JIT settle
    const seconds = [];
    for (let r = 0; r < repeats; r++) {
      const begin = process.cpuUsage();
      for (let i = 0; i < rounds; i++) events = compactEvents(thread);
      const used = process.cpuUsage(begin);
      seconds.push((used.user + used.system) / 1e6);
    }
    process.stdout.write(JSON.stringify({ seconds, events }) + "\n");
    break;
  }
  let reply;
  try {
    reply = { events: compactEvents(thread) };
  } catch (err) {
    reply = { error: String(err && err.message ? err.message : err) };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
}
