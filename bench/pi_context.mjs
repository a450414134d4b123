// Time Pi's own buildSessionContext on an opened session (the comparison column of
// bench/context.py): open once, then build the context RUNS times.
//
//   cd bench && npm ci
//   node bench/pi_context.mjs FILE [RUNS]
//
// Prints one JSON object: {times_ms, messages}.
import { SessionManager } from "@mariozechner/pi-coding-agent";

const path = process.argv[2];
const runs = Number(process.argv[3] ?? 5);
const manager = SessionManager.open(path);
const times = [];
let context;
for (let i = 0; i < runs; i++) {
  const start = performance.now();
  context = manager.buildSessionContext();
  times.push(performance.now() - start);
}
console.log(JSON.stringify({ times_ms: times, messages: context.messages.length }));
