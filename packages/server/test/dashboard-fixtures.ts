import type { AttemptReport } from "@kiln/contract";
import type { LocalBlobStore, Storage } from "@kiln/storage";
import { acceptJob, appendLines, claimJob, finishJob, hostReport } from "../src/testing/job-fixtures.js";

/** What the dashboard tests seed: one job per state, in two repositories. */
export interface SeededJobs {
  readonly passed: string;
  readonly failed: string;
  readonly queued: string;
}

/** Failed tests beside passed and ignored ones, listed failed-last as a host might report them. */
function failedReport(base: AttemptReport): AttemptReport {
  return {
    ...base,
    phases: base.phases.map((p) => (p.name === "test" ? { ...p, status: "failed" as const } : p)),
    tests: [
      { target: "widget (lib)", name: "tests::adds", outcome: "passed", duration_ms: 2 },
      { target: "widget (lib)", name: "tests::slow", outcome: "ignored", duration_ms: null },
      { target: "widget::integration", name: "parses_empty_input", outcome: "failed", duration_ms: 31 },
      // A test name is the crate author's text: it must render as text too.
      { target: "widget::markup", name: "shows_<script>alert('t')</script>", outcome: "failed", duration_ms: 5 },
    ],
    injections: [
      ...(base.injections ?? []),
      {
        setting: "profile.dev.incremental",
        value: "false",
        origin: "platform default",
        status: "not applied",
        detail: "the repository's own Cargo configuration sets it",
      },
    ],
  };
}

/**
 * Jobs of `tenant` through the storage verbs a submission and a host use: a passed job of
 * acme/widget, a failed one of acme/widget whose log holds markup and ANSI colour codes, and a
 * queued job of acme/gadget.
 */
export async function seedDashboardJobs(
  storage: Storage,
  blobs: LocalBlobStore,
  tenant: string,
  now: Date,
): Promise<SeededJobs> {
  const passed = await acceptJob(storage, { tenant, now, repository: "acme/widget" });
  const passedLease = await claimJob(storage, passed.id, now);
  await appendLines(storage, passedLease, ["   Compiling widget v0.1.0", "test result: ok. 1 passed"], now);
  await finishJob(storage, blobs, passedLease, {
    now,
    artifacts: [{ path: "target/release/widget", bytes: Buffer.from("widget binary bytes") }],
  });

  const failed = await acceptJob(storage, { tenant, now, repository: "acme/widget" });
  const failedLease = await claimJob(storage, failed.id, now);
  await appendLines(
    storage,
    failedLease,
    [
      "   Compiling widget v0.1.0",
      "\u001b[1m\u001b[31merror\u001b[0m: assertion failed <script>alert('x')</script>",
      "test parses_empty_input ... FAILED",
      "",
      "failures:",
      "",
      "---- parses_empty_input stdout ----",
      "thread 'parses_empty_input' panicked at src/lib.rs:7:5:",
      "expected Some(0), found None",
    ],
    now,
  );
  await finishJob(storage, blobs, failedLease, {
    now,
    outcome: "failed",
    report: failedReport(hostReport(failedLease, now)),
  });

  const queued = await acceptJob(storage, { tenant, now, repository: "acme/gadget" });
  return { passed: passed.id, failed: failed.id, queued: queued.id };
}
