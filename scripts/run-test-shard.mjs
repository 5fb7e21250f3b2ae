#!/usr/bin/env node
// One lane of scripts/run-tests.mjs beside the others: the test files named in a JSON file, under
// the spec reporter on stdout (printed whole by the caller when the lane ends). By default a shard
// of in-process files, all in this one process (node's test runner with `isolation: "none"`): those
// files spend most of their CPU starting node and loading the same modules (fastify, kysely, ajv and
// the catalogue's compiled schemas) once per file; one process per shard loads them once. With
// `--isolation process --concurrency N`, a process per file, N at a time (the CLI's second pass,
// whose environment differs from the main run's).
//
//   node scripts/run-test-shard.mjs FILES.json RESULT.json [--isolation process --concurrency N]
//
// RESULT.json receives { failed, tests, measured: [[file, { seconds, passed }]], cpuSeconds }: each
// file's time from its first test's start to its last test's end in this process, for the run's ten
// slowest, and the CPU the lane spent, with the processes it started.
import { readFileSync, writeFileSync } from "node:fs";
import { Transform } from "node:stream";
import { finished } from "node:stream/promises";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import { processTreeTicks } from "./machine-cpu.mjs";

const [filesJson, resultJson, ...options] = process.argv.slice(2);
const option = (name, fallback) => {
  const at = options.indexOf(name);
  return at < 0 ? fallback : options[at + 1];
};
const isolation = option("--isolation", "none");
const concurrency = Number(option("--concurrency", "1"));
if (
  filesJson === undefined ||
  resultJson === undefined ||
  !["none", "process"].includes(isolation) ||
  !(concurrency >= 1)
) {
  process.stderr.write("usage: run-test-shard.mjs FILES.json RESULT.json [--isolation none|process --concurrency N]\n");
  process.exit(2);
}
/** As scripts/run-tests.mjs: a bound on a test that hangs, never a measure of speed. */
const TEST_TIMEOUT_MS = 30 * 60 * 1000;
const files = JSON.parse(readFileSync(filesJson, "utf8"));

const spans = new Map();
let failed = false;
let tests = 0;
const timed = new Transform({
  objectMode: true,
  transform(event, _encoding, done) {
    const { type, data } = event;
    if (type === "test:fail" && !data.todo) failed = true;
    // In a process per file, each file is also reported as a test of its own: not counted.
    if ((type === "test:pass" || type === "test:fail") && data.details.type !== "suite" && data.name !== data.file)
      tests++;
    if (data?.file !== undefined && (type === "test:start" || type === "test:complete")) {
      const now = Date.now();
      const span = spans.get(data.file) ?? { from: now, to: now, passed: true };
      span.to = now;
      if (type === "test:complete" && !data.details.passed && !data.todo) span.passed = false;
      spans.set(data.file, span);
    }
    done(null, event);
  },
});
const report = run({ files, isolation, concurrency, timeout: TEST_TIMEOUT_MS }).pipe(timed).pipe(spec());
report.pipe(process.stdout);
await finished(report);
// Tests a file registers through a helper module are reported under the helper's name: the
// measured spans are those of the shard's files that reported under their own.
const measured = files
  .filter((file) => spans.has(file))
  .map((file) => {
    const { from, to, passed } = spans.get(file);
    return [file, { seconds: Math.round((to - from) / 100) / 10, passed }];
  });
// A shard whose files ran no test at all failed to run them.
// The CPU this lane spent, with what its files started (for the run's closing line).
const cpuSeconds = processTreeTicks(process.pid) / 100;
writeFileSync(resultJson, JSON.stringify({ failed: failed || tests === 0, tests, measured, cpuSeconds }));
// Not waiting for what a file left running (a timer, a socket): every test has reported.
process.exit(0);
