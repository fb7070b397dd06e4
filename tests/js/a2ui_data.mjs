// agui-engine.js's a2uiData(): an A2UI surface's resource-bound paths filled through a real gateway.
// usage: node a2ui_data.mjs <agui-engine.js> <run url> <operations JSON> <token>...
// Prints one JSON object: {bindings, results: {token: {ok, data} | {ok: false, error}}}.
import { pathToFileURL } from "node:url";

const mod = await import(pathToFileURL(process.argv[2]).href);
const url = process.argv[3];
const operations = JSON.parse(process.argv[4]);
const results = {};
for (const token of process.argv.slice(5)) {
  try {
    results[token] = { ok: true, data: await mod.a2uiData(operations, { url, headers: { Authorization: `Bearer ${token}` } }) };
  } catch (err) {
    results[token] = { ok: false, error: { name: err.name, isQueryError: err instanceof mod.QueryError,
                                            status: err.status ?? null, code: err.code ?? null } };
  }
}
console.log(JSON.stringify({ bindings: mod.a2uiResourceBindings(operations), results }));
