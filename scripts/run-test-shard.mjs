#!/usr/bin/env node
// One shard of the inner gate (`npm run test:fast`, scripts/run-tests.mjs): the test files named in
// a JSON file, all in this one process (node's test runner with `isolation: "none"`), under the spec
// reporter on stdout. The in-process files spend most of their CPU starting node and loading the
// same modules (fastify, kysely, ajv and the catalogue's compiled schemas) once per file; one
// process per shard loads them once.
//
//   node scripts/run-test-shard.mjs FILES.json RESULT.json
//
// RESULT.json receives { failed, tests, measured: [[file, { seconds, passed }]] }: each file's time from
// its first test's start to its last test's end in this process, for the run's ten slowest.
import { readFileSync, writeFileSync } from "node:fs";
import { Transform } from "node:stream";
import { finished } from "node:stream/promises";
import { run } from "node:test";
import { spec } from "node:test/reporters";

const [filesJson, resultJson] = process.argv.slice(2);
if (filesJson === undefined || resultJson === undefined) {
  process.stderr.write("usage: run-test-shard.mjs FILES.json RESULT.json\n");
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
    if ((type === "test:pass" || type === "test:fail") && data.details.type !== "suite") tests++;
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
const report = run({ files, isolation: "none", timeout: TEST_TIMEOUT_MS }).pipe(timed).pipe(spec());
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
writeFileSync(resultJson, JSON.stringify({ failed: failed || tests === 0, tests, measured }));
// Not waiting for what a file left running (a timer, a socket): every test has reported.
process.exit(0);
