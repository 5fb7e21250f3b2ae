import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { readTenantControls, writeTenantControls } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { crate, type Doc, type Embedded, explainJob, startEmbedded } from "../src/testing/e2e-jobs.js";

const SLEEPING_TEST = `#[test]
fn sleeps() {
    std::thread::sleep(std::time::Duration::from_secs(120));
}
`;

/**
 * A binary whose one unit test passes or fails: one compilation and one link per job (what is
 * metered is whatever ran; how much cargo compiles is not what the totals check).
 */
const oneTest = (name: string, passes: boolean) =>
  crate(name, {
    "src/main.rs": `fn main() {}\n\n#[test]\nfn adds() {\n    assert_eq!(2 + 2, ${passes ? 4 : 5});\n}\n`,
  });

/**
 * Issue 16's must-show on real jobs (each engine, real cargo in the real sandbox, the embedded host):
 * one passed, one failed, one cancelled before placement, one cancelled while running — the
 * export's items sum to the report's totals to the vCPU-second and cent, and the job cancelled
 * before placement has no usage record (one zero adjustment). A job killed with its host is
 * credited in full: usage.test.ts (the lease reclaimed by the reaper) and host-killed.process.test.ts
 * (kill -9 of the server).
 */
for (const dialect of DIALECTS) {
  describe(`usage after real jobs (${dialect.name}, real cargo, real sandbox)`, { skip: dialect.skip }, () => {
    let e: Embedded;
    const ids: Record<string, string> = {};

    const setControls = async (changes: Parameters<typeof writeTenantControls>[1]["changes"]) => {
      const current = await readTenantControls(e.storage, { tenantId: e.tenant });
      const written = await writeTenantControls(e.storage, {
        tenantId: e.tenant,
        expectedVersion: current?.version ?? 0,
        changes,
        changedBy: "operator",
        now: new Date(),
      });
      assert.equal(written.kind, "written");
    };

    before(async () => {
      e = await startEmbedded({ storage: await dialect.openFresh() });
      await setControls({ rateCard: { cents_per_vcpu_second: 0.37, cents_per_gib_month: 0 } });
    });
    after(async () => {
      await e.close();
    });

    it("passed, failed, cancelled before placement, cancelled while running: export totals equal the report's", async () => {
      // Cancelled before placement: concurrency 0 admits none, so it stays queued until cancelled.
      await setControls({ maxRunningJobs: 0 });
      ids.unplaced = await e.jobs.submit(oneTest("unplaced", true), "usage-real-unplaced");
      const queued = await e.jobs.get(ids.unplaced);
      assert.equal(queued.status, "queued");
      assert.equal((await e.jobs.cancel(ids.unplaced, "usage-real-cancel-unplaced")).status, 200);
      assert.equal((await e.jobs.settle(ids.unplaced, 30_000)).status, "cancelled");
      await setControls({ maxRunningJobs: 10 });

      ids.passed = await e.jobs.submit(oneTest("passes", true), "usage-real-passed");
      assert.equal((await e.jobs.settle(ids.passed)).status, "passed", await explainJob(e.jobs, ids.passed));
      ids.failed = await e.jobs.submit(oneTest("fails", false), "usage-real-failed");
      assert.equal((await e.jobs.settle(ids.failed)).status, "failed", await explainJob(e.jobs, ids.failed));
      ids.running = await e.jobs.submit(
        crate("sleeper", { "tests/sleeps.rs": SLEEPING_TEST, "src/lib.rs": "pub fn nothing() {}\n" }),
        "usage-real-running",
      );
      // Cancelled once its attempt has started (the job left the queue).
      await e.jobs.waitFor(ids.running, (j) => j.status === "running", 120_000);
      assert.equal((await e.jobs.cancel(ids.running, "usage-real-cancel-running")).status, 200);
      assert.equal((await e.jobs.settle(ids.running, 60_000)).status, "cancelled");

      const report = (await e.jobs.api("GET", "/api/usage")).json() as Doc;
      const pages: Doc[] = [];
      let url = "/api/usage/export?limit=1";
      for (;;) {
        const page = (await e.jobs.api("GET", url)).json() as Doc;
        pages.push(page);
        if (page.next_cursor === null) break;
        url = `/api/usage/export?cursor=${page.next_cursor}&limit=1`;
      }
      assert.deepEqual(pages[0].totals, report.totals);
      const records = pages.flatMap((p) => p.records as Doc[]);
      const adjustments = pages.flatMap((p) => p.adjustments as Doc[]);
      const uploads = pages.flatMap((p) => p.uploads as Doc[]);
      const storage = pages.flatMap((p) => p.storage as Doc[]);
      const sum = (xs: Doc[], member: string) => xs.reduce((n, x) => n + (x[member] ?? 0), 0);
      assert.equal(sum(records, "vcpu_seconds") + sum(adjustments, "vcpu_seconds"), report.totals.vcpu_seconds);
      assert.equal(
        sum(records, "amount_cents") +
          sum(adjustments, "amount_cents") +
          sum(uploads, "amount_cents") +
          sum(storage, "amount_cents"),
        report.totals.amount_cents,
      );
      assert.ok(report.totals.vcpu_seconds > 0, "the real jobs were metered");

      // One record per job that ran; none for the job cancelled before placement.
      assert.deepEqual(records.map((r) => r.job).sort(), [ids.passed, ids.failed, ids.running].sort());
      assert.deepEqual(Object.fromEntries(records.map((r) => [r.job, r.outcome])), {
        [ids.passed as string]: "passed",
        [ids.failed as string]: "failed",
        [ids.running as string]: "cancelled",
      });
      const unplaced = adjustments.filter((a) => a.job === ids.unplaced);
      assert.deepEqual(
        unplaced.map((a) => [a.kind, a.vcpu_seconds, a.amount_cents]),
        [["cancelled_before_placement", 0, 0]],
      );
      // Each record's vCPU-seconds are the job's own closed usage (its evidence), priced at 0.37 cents.
      for (const record of records) {
        const evidence = await e.jobs.evidence(record.job);
        assert.equal(record.vcpu_seconds, evidence.usage.vcpu_seconds, record.job);
        assert.equal(record.amount_cents, Math.floor(Math.round(record.vcpu_seconds * 0.37 * 1e6) / 1e6 + 0.5));
      }
    });
  });
}
