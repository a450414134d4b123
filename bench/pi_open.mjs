// Time Pi's own SessionManager.open on a session file (the comparison column of bench/run.py),
// and report what Pi derives from it, so tests can compare contexts with sessiontree's.
//
//   cd bench && npm ci            # installs @mariozechner/pi-coding-agent@0.73.1 (package-lock.json)
//   node bench/pi_open.mjs FILE [RUNS]
//
// Prints one JSON object: {open_ms, times_ms, entries, leaf_id, context_messages, roles,
// thinking_level, model, rss_mb}.
import { SessionManager } from "@mariozechner/pi-coding-agent";

const path = process.argv[2];
const runs = Number(process.argv[3] ?? 1);
const times = [];
let manager;
for (let i = 0; i < runs; i++) {
  const start = performance.now();
  manager = SessionManager.open(path);
  times.push(performance.now() - start);
}
const context = manager.buildSessionContext();
const model = context.model ? `${context.model.provider}/${context.model.modelId}` : null;
console.log(
  JSON.stringify({
    open_ms: Math.min(...times),
    times_ms: times,
    entries: manager.getEntries().length,
    leaf_id: manager.getLeafId(),
    context_messages: context.messages.length,
    roles: context.messages.map((m) => m.role),
    thinking_level: context.thinkingLevel,
    model,
    rss_mb: process.memoryUsage().rss / 1e6,
  }),
);
