// Preloaded (`--import`) into each marked test file's process scripts/run-tests.mjs starts: when
// the file's process exits, it appends the CPU it spent, with every process it started and waited for (servers, hosts, sandboxes, cargo,
// guests), to the JSON-lines file KILN_TEST_CPU_FILE names. What the closing lines rank the
// files by, and what decides which files to cut: on a machine the gate saturates, its wall time is
// the CPU its files spend. PostgreSQL's share is the cluster's, not a file's.
//
// Inert in any other process that loads it (one the test starts with the same flags).
import { appendFileSync } from "node:fs";
import { processTreeTicks } from "./machine-cpu.mjs";

const out = process.env.KILN_TEST_CPU_FILE;
const file = process.argv[1];
if (out !== undefined && file?.endsWith(".test.js")) {
  process.on("exit", () => {
    try {
      appendFileSync(out, `${JSON.stringify({ file, cpuSeconds: processTreeTicks(process.pid) / 100 })}\n`);
    } catch (error) {
      // A measurement that could not be kept must not change how the file's process ends.
      process.stderr.write(`test-file-cpu: ${file}'s CPU was not recorded: ${error}\n`);
    }
  });
}
