import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { testedCrate } from "../src/testing/crates.js";
import {
  crate,
  type Doc,
  type Embedded,
  explainJob,
  type Jobs,
  observedSandboxExecutor,
  processesCarrying,
  startEmbedded,
  transitionsTo,
  waitForProcess,
  waitUntilNoneCarry,
} from "../src/testing/e2e-jobs.js";

/**
 * A build script that leaves plain children, a setsid'd child and a double-forked daemon
 * behind (each `sh` carrying the marker in its command line, every process carrying it in
 * its environment), then sleeps.
 */
const SLEEPING_BUILD_SCRIPT = `use std::process::{Command, Stdio};
use std::time::Duration;

fn quiet(command: &mut Command) -> &mut Command {
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let marker = std::env::var("KILN_MARKER").expect("KILN_MARKER");
    for i in 0..2 {
        quiet(Command::new("sh").args(["-c", "sleep 60; exit 0", &format!("{marker}-child{i}")]))
            .spawn()
            .expect("child");
    }
    quiet(Command::new("setsid").args(["sh", "-c", "sleep 60; exit 0", &format!("{marker}-setsid")]))
        .spawn()
        .expect("setsid child");
    let daemon = format!("(setsid sh -c 'sleep 60; exit 0' {marker}-daemon </dev/null >/dev/null 2>&1 &); exit 0");
    Command::new("sh").args(["-c", &daemon]).status().expect("double fork");
    std::thread::sleep(Duration::from_secs(60));
}
`;

const SLEEPING_TEST = `#[test]
fn sleeps_past_the_ceiling() {
    std::thread::sleep(std::time::Duration::from_secs(60));
}
`;

const newMarker = (what: string) => `kiln-e2e-${what}-${randomBytes(6).toString("hex")}`;

describe("cancellation, the wall-clock ceiling and retry, end to end (SQLite, real cargo, real sandbox)", () => {
  let e: Embedded;
  let abortedAt: Map<string, number>;
  /** Jobs submitted through an app whose platform wall-clock ceiling is 5 s. */
  let ceilingJobs: Jobs;
  let ceilingJobId: string | undefined;

  before(async () => {
    const observed = observedSandboxExecutor();
    abortedAt = observed.abortedAt;
    e = await startEmbedded({ executor: observed.executor });
    ceilingJobs = await e.extraApp({ wallClockSeconds: 5 });
  });
  after(async () => {
    await e.close();
  });

  it("cancel mid-build: the receipt, the whole tree reaped within 2 s of the executor seeing it, cancelled, no usage after the request, settled once", async (t) => {
    const marker = newMarker("cancel");
    const id = await e.jobs.submit(
      crate("cancelme", { "build.rs": SLEEPING_BUILD_SCRIPT, "src/lib.rs": "pub fn nothing() {}\n" }),
      `submit-${marker}`,
      { operation: "build", environment: { KILN_MARKER: marker } },
    );
    await e.jobs.waitFor(id, (j) => j.status !== "queued", 60_000);
    // The build script has started once its last child (the double-forked daemon) exists.
    await waitForProcess(`${marker}-daemon`, 90_000).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${await explainJob(e.jobs, id)}`);
    });
    const running = await processesCarrying(marker);
    for (const name of ["child0", "child1", "setsid", "daemon"])
      assert.ok(
        running.some((p) => p.cmdline.includes(`${marker}-${name}`)),
        `the build script's ${name} is running: ${JSON.stringify(running)}`,
      );
    assert.ok(
      running.some((p) => /^sleep 60/.test(p.cmdline)),
      `the sleep 60 grandchildren are seen: ${JSON.stringify(running)}`,
    );

    const submitter = (await e.jobs.get(id)).submitted_by;
    const requestedAt = Date.now();
    const receipt = await e.jobs.cancel(id, `cancel-${marker}`);
    const answeredAt = Date.now();
    assert.equal(receipt.status, 200, receipt.body);
    assert.deepEqual(receipt.json(), { job: id, state: "cancellation_requested", requested_by: submitter });
    const replay = await e.jobs.cancel(id, `cancel-${marker}`);
    assert.equal(replay.status, 200, replay.body);
    assert.deepEqual(replay.json(), receipt.json(), "the same key replays the same receipt");

    const goneAt = await waitUntilNoneCarry(marker, 20_000);
    const seenAt = abortedAt.get(`${id}-a1`);
    assert.ok(seenAt !== undefined, "the executor's abort signal fired");
    assert.ok(
      seenAt - requestedAt <= 4000,
      `the executor saw the cancel ${seenAt - requestedAt} ms after the request (heartbeat every 2 s)`,
    );
    assert.ok(
      goneAt !== null,
      `processes carrying the marker survived: ${JSON.stringify(await processesCarrying(marker))}`,
    );
    assert.ok(
      goneAt - seenAt <= 2000,
      `the last marked process was gone ${goneAt - seenAt} ms after the executor saw the cancel`,
    );

    t.diagnostic(
      `executor saw the cancel ${seenAt - requestedAt} ms after the request; tree gone ${goneAt - seenAt} ms later; ${running.length} marked processes before`,
    );
    const job = await e.jobs.settle(id, 30_000);
    assert.equal(job.status, "cancelled", await explainJob(e.jobs, id));
    assert.equal(job.failure?.cause, "cancelled", JSON.stringify(job.failure));
    assert.deepEqual(transitionsTo(job), ["queued", "running", "cancellation_requested", "cancelled"]);
    const cancelTransition = (job.transitions as Doc[]).find((t) => t.to === "cancellation_requested");
    assert.match(cancelTransition.reason, new RegExp(`cancelled by ${submitter}`));

    const evidence = await e.jobs.evidence(id);
    const attempts = evidence.attempts.attempts as Doc[];
    assert.equal(attempts.length, 1);
    const attemptStart = Date.parse(attempts[0].started_at);
    const cancelInstant = Date.parse(cancelTransition.at);
    assert.ok(cancelInstant >= requestedAt - 5 && cancelInstant <= answeredAt + 5, "the request's instant is recorded");
    // Metering closes at the request: nothing after it is billed (+1 s for rounding up).
    assert.ok(evidence.usage !== null, "usage was recorded");
    const billable = Math.ceil((cancelInstant - attemptStart) / 1000) + 1;
    assert.ok(
      evidence.usage.seconds <= billable,
      `usage ${evidence.usage.seconds} s exceeds the ${billable} s from the attempt's start to the cancel request`,
    );
    assert.ok(evidence.usage.seconds <= Math.ceil((answeredAt - attemptStart) / 1000) + 1);
    t.diagnostic(
      `usage ${JSON.stringify(evidence.usage)}; attempt ${attempts[0].started_at} → ${attempts[0].finished_at}; cancel requested ${cancelTransition.at}`,
    );
    assert.equal(evidence.usage.size, "kiln2-cpu");
    assert.equal(evidence.usage.vcpu_seconds, evidence.usage.seconds * 2);
    assert.equal(evidence.settlement?.status, "cancelled", JSON.stringify(evidence.settlement));
    assert.equal(evidence.settlement.attempts, 1);
    assert.equal(evidence.settlement.usage_recorded, true);

    // Settled once: one terminal transition and one terminal event, and nothing moves afterwards
    // (two more heartbeat periods and a reaper pass).
    assert.equal(transitionsTo(job).filter((s) => TERMINAL_JOB_STATUSES.has(s)).length, 1);
    await sleep(4500);
    const later = await e.jobs.evidence(id);
    assert.deepEqual(later.settlement, evidence.settlement);
    assert.deepEqual(later.usage, evidence.usage);
    assert.deepEqual(later.job.transitions, job.transitions);
    const events = await e.storage.db.selectFrom("job_events").select("status").where("job_id", "=", id).execute();
    assert.deepEqual(
      events.map((r) => r.status).filter((s) => TERMINAL_JOB_STATUSES.has(s)),
      ["cancelled"],
    );
    assert.deepEqual(await processesCarrying(marker), []);
    assert.match(await e.jobs.logText(id), /cleanup: no process of the attempt remains; its cgroup was removed/);

    const again = await e.jobs.cancel(id, `cancel-again-${marker}`);
    assert.equal(again.status, 409, again.body);
    assert.equal(again.json().code, "conflict");
  });

  it("the wall-clock ceiling: a test sleeping 60 s under a 5 s ceiling fails with cause wall_clock_ceiling, well before 60 s", async (t) => {
    const marker = newMarker("ceiling");
    const submittedAt = Date.now();
    const id = await ceilingJobs.submit(crate("sleepy", { "src/lib.rs": SLEEPING_TEST }), `submit-${marker}`, {
      environment: { KILN_MARKER: marker },
    });
    ceilingJobId = id;
    // The cause, not the clock, says the ceiling ended it (the test sleeps 60 s); the wait bounds a hang.
    const job = await ceilingJobs.settle(id, 300_000);
    const elapsed = Date.now() - submittedAt;
    assert.equal(job.status, "failed", await explainJob(ceilingJobs, id));
    assert.equal(job.failure?.cause, "wall_clock_ceiling", JSON.stringify(job.failure));
    assert.match(job.failure.detail, /5 s/);
    t.diagnostic(`settled ${elapsed} ms after submission: ${JSON.stringify(job.failure)}`);
    assert.deepEqual(transitionsTo(job), ["queued", "running", "failed"]);
    const evidence = await ceilingJobs.evidence(id);
    assert.equal(evidence.report.units.length, 1);
    assert.equal(evidence.report.units[0].exit_code, null, "the attempt was killed, not exited");
    assert.ok(
      evidence.usage.seconds >= 5 && evidence.usage.seconds <= 20,
      `usage ${JSON.stringify(evidence.usage)} covers the ceiling`,
    );
    assert.equal(evidence.settlement?.status, "failed");
    assert.deepEqual(await processesCarrying(marker), [], "nothing of the attempt outlived its ceiling");
    const log = await ceilingJobs.logText(id);
    assert.match(log, /wall-clock ceiling of 5 s reached/);
    assert.match(log, /cleanup: no process of the attempt remains; its cgroup was removed/);
  });

  it("retry of a terminal job: a fresh linked job that runs; the original is untouched; a live job cannot be retried", async () => {
    const original = await e.jobs.submit(testedCrate("retried", 0), `submit-${newMarker("retry")}`);
    const passed = await e.jobs.settle(original, 120_000);
    assert.equal(passed.status, "passed", await explainJob(e.jobs, original));

    const key = `retry-${original}`;
    const res = await e.jobs.retry(original, key);
    assert.equal(res.status, 200, res.body);
    const receipt = res.json();
    assert.equal(receipt.original, original);
    assert.equal(receipt.submitted_by, passed.submitted_by);
    assert.notEqual(receipt.retry, original);
    const replay = await e.jobs.retry(original, key);
    assert.deepEqual(replay.json(), receipt, "the same key replays the same retry");

    // The fresh job is not terminal yet, so it cannot itself be retried.
    const live = await e.jobs.get(receipt.retry);
    if (!TERMINAL_JOB_STATUSES.has(live.status)) {
      const refused = await e.jobs.retry(receipt.retry, `retry-live-${original}`);
      assert.equal(refused.status, 409, refused.body);
      assert.equal(refused.json().code, "conflict");
    }

    const retried = await e.jobs.settle(receipt.retry, 120_000);
    assert.equal(retried.status, "passed", await explainJob(e.jobs, receipt.retry));
    assert.equal(retried.retry_of, original);
    assert.deepEqual(transitionsTo(retried), ["queued", "running", "passed"]);
    assert.equal(retried.units.length, 1);
    assert.equal(retried.units[0].id, `${receipt.retry}-a1`);
    const retriedEvidence = await e.jobs.evidence(receipt.retry);
    assert.ok(
      (retriedEvidence.report.tests as Doc[]).some((t) => t.name === "tests::adds" && t.outcome === "passed"),
      "the retry ran the tests itself",
    );
    assert.equal(retriedEvidence.settlement?.attempts, 1);
    const after = await e.jobs.get(original);
    assert.deepEqual(after.transitions, passed.transitions, "the original job is untouched");
    assert.equal(after.retry_of, null);

    // A job that failed at its ceiling retries as a fresh job carrying the same ceiling, and runs again.
    if (ceilingJobId !== undefined) {
      const again = await ceilingJobs.retry(ceilingJobId, `retry-${ceilingJobId}`);
      assert.equal(again.status, 200, again.body);
      const rerun = await ceilingJobs.settle(again.json().retry, 60_000);
      assert.equal(rerun.retry_of, ceilingJobId);
      assert.deepEqual(transitionsTo(rerun), ["queued", "running", "failed"]);
      assert.equal(rerun.failure?.cause, "wall_clock_ceiling", await explainJob(ceilingJobs, rerun.id));
    }
  });
});
