import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { rmdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { cgroupDirectoriesNamed } from "@kiln/host/testing";
import { openStorage, type Storage, writeTenantControls } from "@kiln/storage";
import {
  crate,
  type Doc,
  explainJob,
  fetchApi,
  Jobs,
  processesCarrying,
  transitionsTo,
  waitForProcess,
  waitUntilNoneCarry,
} from "../src/testing/e2e-jobs.js";
import { tenantWithRepository } from "../src/testing/harness.js";
import { type ServerProcess, startServerProcess, stopServerProcess } from "./server-process.js";

/**
 * A build script that leaves marked children behind (a plain one and a double-forked,
 * setsid'd daemon) and sleeps 20 s (room for the test to kill the server while it runs; the
 * sandbox shows no attempt number, so the re-run sleeps as long), then a test that passes.
 */
const SLOW_BUILD_SCRIPT = `use std::process::{Command, Stdio};
use std::time::Duration;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let marker = std::env::var("KILN_MARKER").expect("KILN_MARKER");
    Command::new("sh")
        .args(["-c", "sleep 60; exit 0", &format!("{marker}-child")])
        .stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null())
        .spawn()
        .expect("child");
    let daemon = format!("(setsid sh -c 'sleep 60; exit 0' {marker}-daemon </dev/null >/dev/null 2>&1 &); exit 0");
    Command::new("sh").args(["-c", &daemon]).status().expect("double fork");
    std::thread::sleep(Duration::from_secs(20));
}
`;

describe("the server process (and its local host) killed mid-attempt, end to end (SQLite, real cargo, real sandbox)", () => {
  let dataDir: string;
  let storage: Storage;
  let token: string;
  let first: ServerProcess | undefined;
  let second: ServerProcess | undefined;
  /** The job whose first attempt died with the first server. */
  let lostJob: string | undefined;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "kiln-e2e-host-killed-"));
    first = await startServerProcess({
      KILN_DATA_DIR: dataDir,
      KILN_DATABASE_URL: undefined,
      KILN_PUBLIC_URL: undefined,
      KILN_LOCAL_HOST: undefined,
    });
    // The same SQLite file the server uses (WAL: both processes read and write it).
    storage = await openStorage({ dataDir });
    const member = await tenantWithRepository(storage, { role: "member", now: new Date() });
    token = member.token;
    // A rate card, so that "not charged" is checked in cents as well as vCPU-seconds.
    const priced = await writeTenantControls(storage, {
      tenantId: member.tenant,
      expectedVersion: 0,
      changes: { rateCard: { cents_per_vcpu_second: 0.37, cents_per_gib_month: 0 } },
      changedBy: "test",
      now: new Date(),
    });
    assert.equal(priced.kind, "written");
  });
  after(async () => {
    await stopServerProcess(first, "SIGKILL");
    await stopServerProcess(second, "SIGTERM");
    await storage.close();
    rmSync(dataDir, { recursive: true, force: true });
    // The lost attempt's (empty) cgroups, should the host have left them.
    if (lostJob !== undefined)
      for (const dir of (await cgroupDirectoriesNamed(`${lostJob}-a1`)).reverse())
        await rmdir(dir).catch(() => undefined);
  });

  it("kill -9 of the server: its sandbox dies with it; a second server reclaims the lease, runs attempt 2, and the job passes and settles once", async (t) => {
    assert.ok(first !== undefined);
    const marker = `kiln-e2e-killed-${randomBytes(6).toString("hex")}`;
    const jobs1 = new Jobs(fetchApi(first.url, token));
    const id = await jobs1.submit(
      crate("survivor", {
        "build.rs": SLOW_BUILD_SCRIPT,
        "src/lib.rs": "pub fn one() -> u32 { 1 }\n\n#[test]\nfn survives() {\n    assert_eq!(one(), 1);\n}\n",
      }),
      `submit-${marker}`,
      { environment: { KILN_MARKER: marker } },
    );
    lostJob = id;
    await jobs1.waitFor(id, (j) => j.status !== "queued", 60_000);
    await waitForProcess(`${marker}-daemon`, 90_000).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${await explainJob(jobs1, id)}\n${first?.output()}`);
    });
    assert.equal((await jobs1.get(id)).status, "running");

    const killedAt = Date.now();
    await stopServerProcess(first, "SIGKILL");
    // They die with the server (parent-death signals down the chain); how soon depends on the
    // machine's load, so the wait is a bound on a hang, not a verdict on speed.
    const goneAt = await waitUntilNoneCarry(marker, 60_000);
    assert.ok(
      goneAt !== null,
      `processes of the killed server's attempt survived: ${JSON.stringify(await processesCarrying(marker))}`,
    );
    t.diagnostic(`the attempt's processes were gone ${goneAt - killedAt} ms after kill -9`);

    second = await startServerProcess({
      KILN_DATA_DIR: dataDir,
      KILN_DATABASE_URL: undefined,
      KILN_PUBLIC_URL: undefined,
      KILN_LOCAL_HOST: undefined,
    });
    const jobs2 = new Jobs(fetchApi(second.url, token));
    const job = await jobs2.settle(id, 120_000);
    t.diagnostic(`settled ${Date.now() - killedAt} ms after the kill; transitions ${JSON.stringify(job.transitions)}`);
    assert.equal(job.status, "passed", `${await explainJob(jobs2, id)}\n${second.output()}`);
    assert.deepEqual(transitionsTo(job), ["queued", "running", "queued", "running", "passed"]);
    const requeued = (job.transitions as Doc[])[2];
    assert.match(requeued.reason, /attempt 1 lost/, "the requeue names the lost attempt");
    assert.ok(
      Date.parse(requeued.at) >= killedAt + 12_000,
      `attempt 1 was reclaimed ${Date.parse(requeued.at) - killedAt} ms after the kill, before its 15 s lease could have expired`,
    );
    assert.match((job.transitions as Doc[])[3].reason, /attempt 2/);
    assert.deepEqual(
      (job.units as Doc[]).map((u) => u.attempt),
      [1, 2],
    );

    const evidence = await jobs2.evidence(id);
    const attempts = evidence.attempts.attempts as Doc[];
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.state, a.outcome]),
      [
        [1, "lost", "lost"],
        [2, "finished", "passed"],
      ],
    );
    assert.ok(
      (evidence.report.tests as Doc[]).some((x) => x.attempt === 2 && x.name === "survives" && x.outcome === "passed"),
      JSON.stringify(evidence.report.tests),
    );
    assert.equal(evidence.settlement?.status, "passed", JSON.stringify(evidence.settlement));
    assert.equal(evidence.settlement.attempts, 2);
    assert.equal(evidence.settlement.usage_recorded, true);
    assert.ok(evidence.usage !== null && evidence.usage.seconds >= 1, JSON.stringify(evidence.usage));

    // Settled once: one terminal transition and event, and nothing moves afterwards.
    assert.equal(transitionsTo(job).filter((s) => TERMINAL_JOB_STATUSES.has(s)).length, 1);
    await sleep(4500);
    const later = await jobs2.evidence(id);
    assert.deepEqual(later.settlement, evidence.settlement);
    assert.deepEqual(later.usage, evidence.usage);
    assert.deepEqual(later.job.transitions, job.transitions);
    const events = await storage.db.selectFrom("job_events").select("status").where("job_id", "=", id).execute();
    assert.deepEqual(
      events.map((r) => r.status).filter((s) => TERMINAL_JOB_STATUSES.has(s)),
      ["passed"],
    );
    const rows = await storage.db.selectFrom("attempts").select(["number", "state"]).where("job_id", "=", id).execute();
    assert.deepEqual(
      rows.map((r) => [r.number, r.state]),
      [
        [1, "lost"],
        [2, "finished"],
      ],
    );
    assert.deepEqual(await processesCarrying(marker), []);
  });

  it("the attempt killed with its host is not charged: usage and its export show it credited, their totals equal", async () => {
    assert.ok(lostJob !== undefined && second !== undefined, "the job ran and a second server settled it");
    const jobs2 = new Jobs(fetchApi(second.url, token));
    const evidence = await jobs2.evidence(lostJob);
    const lostAttempt = (evidence.attempts.attempts as Doc[]).find((a) => a.attempt === 1);
    const period = String(lostAttempt?.started_at ?? "").slice(0, 7);
    assert.match(period, /^\d{4}-\d{2}$/, JSON.stringify(evidence.attempts));

    const reportResponse = await jobs2.api("GET", `/api/usage?period=${period}`);
    assert.equal(reportResponse.status, 200, reportResponse.body);
    const report = reportResponse.json() as Doc;
    const pages: Doc[] = [];
    let url = `/api/usage/export?period=${period}&limit=1`;
    for (;;) {
      const page = await jobs2.api("GET", url);
      assert.equal(page.status, 200, page.body);
      pages.push(page.json());
      const next = pages.at(-1).next_cursor;
      if (next === null) break;
      url = `/api/usage/export?cursor=${next}&limit=1`;
    }
    const records = pages.flatMap((p) => p.records as Doc[]);
    const adjustments = pages.flatMap((p) => p.adjustments as Doc[]);
    const uploads = pages.flatMap((p) => p.uploads as Doc[]);
    const storageRecords = pages.flatMap((p) => p.storage as Doc[]);

    // Both attempts are metered; the killed one is offset in full by an infrastructure adjustment.
    assert.deepEqual(
      records.map((r) => [r.job, r.attempt, r.outcome]),
      [
        [lostJob, 1, "lost"],
        [lostJob, 2, "passed"],
      ],
    );
    const [killed, rerun] = records;
    assert.ok(killed.vcpu_seconds > 0, `the killed attempt ran: ${JSON.stringify(killed)}`);
    assert.equal(killed.amount_cents, Math.floor(Math.round(killed.vcpu_seconds * 0.37 * 1e6) / 1e6 + 0.5));
    assert.deepEqual(
      adjustments.map((a) => [a.kind, a.job, a.attempt, a.vcpu_seconds, a.amount_cents]),
      [["infrastructure", lostJob, 1, -killed.vcpu_seconds, -killed.amount_cents]],
    );
    assert.match(adjustments[0].reason, /attempt 1 lost with its host: not charged/);

    // What is charged is the re-run alone (its closed usage, as the job's evidence reports it).
    assert.equal(rerun.vcpu_seconds, evidence.usage.vcpu_seconds);
    assert.equal(report.totals.vcpu_seconds, rerun.vcpu_seconds);
    assert.equal(report.totals.adjustment_vcpu_seconds, -killed.vcpu_seconds);
    assert.equal(report.totals.adjustment_amount_cents, -killed.amount_cents);
    assert.equal(report.totals.attempts, 2);
    assert.equal(report.totals.jobs, 1);

    // The export's totals are the report's, and its items sum to them to the vCPU-second and cent.
    assert.deepEqual(pages[0].totals, report.totals);
    const sum = (xs: Doc[], member: string) => xs.reduce((n, x) => n + (x[member] ?? 0), 0);
    assert.equal(sum(records, "vcpu_seconds") + sum(adjustments, "vcpu_seconds"), report.totals.vcpu_seconds);
    assert.equal(
      sum(records, "amount_cents") +
        sum(adjustments, "amount_cents") +
        sum(uploads, "amount_cents") +
        sum(storageRecords, "amount_cents"),
      report.totals.amount_cents,
    );
    assert.equal(
      report.totals.amount_cents,
      rerun.amount_cents + sum(uploads, "amount_cents") + sum(storageRecords, "amount_cents"),
    );
  });

  it("the lost attempt's directory and cgroups do not outlive it once a host runs again", async () => {
    assert.ok(lostJob !== undefined, "the job ran");
    const directory = join(dataDir, "attempts", `${lostJob}-a1`);
    assert.equal(existsSync(directory), false, `${directory} is left behind`);
    assert.deepEqual(await cgroupDirectoriesNamed(`${lostJob}-a1`), [], "the lost attempt's cgroups are left behind");
  });
});
