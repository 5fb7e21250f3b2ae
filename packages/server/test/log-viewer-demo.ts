import type { AttemptReport } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { addPersonToTenant, appendLogRecords, createTenant, type LogLine, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/build-app.js";
import { listenBeforeTheApp } from "../src/testing/app-origin.js";
import { testBlobs } from "../src/testing/harness.js";
import { type AttemptLease, acceptJob, claimJob, finishJob, hostReport } from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";

/**
 * A kiln server on loopback holding what the log viewer is shown with: a failed `cargo test`
 * whose 20,000-line log has kiln's preamble and epilogue, cargo's colours, a passing and a
 * failing test binary, and a panic after a noisy test's output; and a job still running. Used by
 * the log viewer's browser test and by scripts/job-page-screenshots.mjs (docs/screenshots).
 */
export interface LogViewerDemo {
  readonly base: string;
  /** A member's `kiln_session` cookie. */
  readonly cookie: string;
  readonly failed: string;
  readonly running: string;
  /** The sequence of the one line holding NEEDLE, on the failed job's sixth log page. */
  readonly needleLine: number;
  /** The failed job's last line. */
  readonly lastLine: number;
  /** Appends lines to the running job, as its host would. */
  appendRunning(lines: readonly Omit<LogLine, "at">[]): Promise<void>;
  close(): Promise<void>;
}

/** A text only one line of the failed job's log holds. */
export const NEEDLE = "checksum mismatch in chunk 5387";

const ESC = "\u001b";
const green = (text: string) => `${ESC}[1m${ESC}[32m${text}${ESC}[0m`;
const red = (text: string) => `${ESC}[1m${ESC}[31m${text}${ESC}[0m`;

const PREAMBLE: Omit<LogLine, "at">[] = [
  { stream: "system", text: "kiln: placed on host-a (kiln2-cpu: 2 vCPUs, 4 GiB), lineage test:stable:kiln2-cpu warm" },
  { stream: "system", text: "kiln: network policy offline: the lockfile's crates are vendored" },
  {
    stream: "system",
    text: "kiln: cargo test --message-format=json-render-diagnostics --color=always (toolchain 1.85.0, no network)",
  },
];

function compileLines(): Omit<LogLine, "at">[] {
  const crates = [
    "memchr v2.7.4",
    "itoa v1.0.14",
    "serde v1.0.210",
    "ryu v1.0.18",
    "serde_json v1.0.133",
    "widget v0.1.0",
  ];
  return [
    ...crates.map((c) => ({ stream: "stderr" as const, text: `${green("   Compiling")} ${c}` })),
    {
      stream: "stderr",
      text: `${green("    Finished")} \`test\` profile [unoptimized + debuginfo] target(s) in 4.21s`,
    },
  ];
}

function unitTests(): Omit<LogLine, "at">[] {
  const names = ["parser::accepts_empty", "parser::rejects_garbage", "codec::round_trips", "codec::keeps_order"];
  return [
    { stream: "stderr", text: `${green("     Running")} unittests src/lib.rs (target/debug/deps/widget-3f2a9c1d)` },
    { stream: "stdout", text: "" },
    { stream: "stdout", text: `running ${names.length} tests` },
    ...names.map((n) => ({ stream: "stdout" as const, text: `test ${n} ... ${ESC}[32mok${ESC}[0m` })),
    { stream: "stdout", text: "" },
    {
      stream: "stdout",
      text: `test result: ${ESC}[32mok${ESC}[0m. ${names.length} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s`,
    },
    { stream: "stdout", text: "" },
  ];
}

const EPILOGUE: Omit<LogLine, "at">[] = [
  "kiln: cargo exited with 101 after 41.7 s",
  "kiln: sandbox: peak memory 312 MiB of 4 GiB",
  "kiln: sandbox: cpu 58.2 s user, 6.1 s system",
  "kiln: sandbox: 148 processes started, none left",
  "kiln: sandbox: target directory 611 MiB",
  "kiln: saved the lineage's cache (+18 MiB)",
].map((text) => ({ stream: "system", text }));

/** The failed job's log: about 20,000 lines, the panic after the noisy test's output. */
function failedLog(): Omit<LogLine, "at">[] {
  const head = [
    ...PREAMBLE,
    ...compileLines(),
    ...unitTests(),
    { stream: "stderr" as const, text: `${green("     Running")} tests/replay.rs (target/debug/deps/replay-8be0f4a2)` },
    { stream: "stdout" as const, text: "" },
    { stream: "stdout" as const, text: "running 2 tests" },
    { stream: "stdout" as const, text: `test replay::small_archive ... ${ESC}[32mok${ESC}[0m` },
  ];
  const noisy: Omit<LogLine, "at">[] = Array.from({ length: 19_930 }, (_, i) => ({
    stream: i % 50 === 49 ? "stderr" : "stdout",
    text:
      i + 1 === 5387
        ? `replay: chunk ${i + 1}: ${NEEDLE} (expected 9f2c, found 77d0)`
        : `replay: chunk ${i + 1}: ${i % 50 === 49 ? "warning: slow chunk, retrying" : "verified"}`,
  }));
  const tail: Omit<LogLine, "at">[] = [
    { stream: "stdout", text: `test replay::large_archive ... ${red("FAILED")}` },
    { stream: "stdout", text: "" },
    { stream: "stdout", text: "failures:" },
    { stream: "stdout", text: "" },
    { stream: "stdout", text: "---- replay::large_archive stdout ----" },
    { stream: "stdout", text: "thread 'replay::large_archive' panicked at tests/replay.rs:88:9:" },
    { stream: "stdout", text: "assertion `left == right` failed: chunks verified" },
    { stream: "stdout", text: "  left: 19929" },
    { stream: "stdout", text: " right: 19930" },
    { stream: "stdout", text: "" },
    {
      stream: "stdout",
      text: `test result: ${red("FAILED")}. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out`,
    },
    { stream: "stdout", text: "" },
    { stream: "stderr", text: `${red("error")}${ESC}[1m: test failed, to rerun pass \`--test replay\`${ESC}[0m` },
    ...EPILOGUE,
  ];
  return [...head, ...noisy, ...tail];
}

function failedReport(lease: AttemptLease, now: Date, panicLine: number): AttemptReport {
  const base = hostReport(lease, now);
  const location = {
    file: "tests/replay.rs",
    line: 88,
    column: 9,
    in_repository: true,
    printed: "tests/replay.rs:88:9",
  };
  const message = "assertion `left == right` failed: chunks verified\n  left: 19929\n right: 19930";
  const lib = ["parser::accepts_empty", "parser::rejects_garbage", "codec::round_trips", "codec::keeps_order"];
  return {
    ...base,
    phases: base.phases.map((p) => (p.name === "test" ? { ...p, status: "failed" as const, duration_ms: 41_700 } : p)),
    tests: [
      ...lib.map((name) => ({ target: "widget (lib)", name, outcome: "passed" as const, duration_ms: 1 })),
      { target: "replay", name: "replay::small_archive", outcome: "passed", duration_ms: 310 },
      {
        target: "replay",
        name: "replay::large_archive",
        outcome: "failed",
        duration_ms: 39_800,
        panic: { message, location, log_sequence: panicLine },
      } as AttemptReport["tests"][number],
    ],
    failures: [
      {
        kind: "test_panic",
        message,
        code: null,
        target: "replay",
        test: "replay::large_archive",
        location,
        log_sequence: panicLine,
      } as NonNullable<AttemptReport["failures"]>[number],
    ],
  };
}

async function append(storage: Storage, lease: AttemptLease, lines: readonly Omit<LogLine, "at">[], at: Date) {
  for (let from = 0; from < lines.length; from += 2000) {
    const accepted = await appendLogRecords(storage, {
      ...lease,
      lines: lines.slice(from, from + 2000).map((l) => ({ ...l, at: new Date(at.getTime() + from) })),
    });
    if (!accepted) throw new Error("the demo's lines were refused");
  }
}

export async function startLogViewerDemo(): Promise<LogViewerDemo> {
  const storage = await openSqliteForTest();
  const clock = ManualClock.withRealTimers(new Date());
  const blobs = testBlobs();
  const tenant = `demo${process.pid}`;
  await createTenant(storage, { id: tenant, displayName: "Acme Widgets" }, clock.now());
  const email = `ann@${tenant}.example`;
  await addPersonToTenant(storage, { tenantId: tenant, email, role: "member" }, clock.now());

  const failedLines = failedLog();
  const failed = await acceptJob(storage, { tenant, now: clock.now(), repository: "acme/widget" });
  const failedLease = await claimJob(storage, failed.id, clock.now());
  await append(storage, failedLease, failedLines, clock.now());
  const panicLine = failedLines.findIndex((l) => l.text.startsWith("thread 'replay::large_archive' panicked")) + 1;
  await finishJob(storage, blobs, failedLease, {
    now: clock.now(),
    outcome: "failed",
    report: failedReport(failedLease, clock.now(), panicLine),
  });

  const running = await acceptJob(storage, { tenant, now: clock.now(), repository: "acme/widget" });
  const runningLease = await claimJob(storage, running.id, clock.now());
  await append(storage, runningLease, [...PREAMBLE, ...compileLines(), ...unitTests()], clock.now());

  const origin = await listenBeforeTheApp();
  const base = origin.base;
  const app: FastifyInstance = buildApp({
    storage,
    clock,
    blobs,
    version: "test",
    publicOrigin: base,
    checkResponses: true,
  });
  await origin.serve(app);
  const cookie = await signIn(app, storage, email, undefined, clock);
  return {
    base,
    cookie,
    failed: failed.id,
    running: running.id,
    needleLine: failedLines.findIndex((l) => l.text.includes(NEEDLE)) + 1,
    lastLine: failedLines.length,
    appendRunning: (lines) => append(storage, runningLease, lines, clock.now()),
    close: async () => {
      await origin.close();
      await app.close();
      await storage.close();
    },
  };
}
