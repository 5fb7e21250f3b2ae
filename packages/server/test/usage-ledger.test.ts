import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Clock, silentLogger } from "@kiln/contract";
import {
  claimNextJob,
  finishAttempt,
  listOperatorAuditEntries,
  purgeLineage,
  recordLineageSave,
  registerHost,
  type Storage,
  sampleLineageStorage,
} from "@kiln/storage";
import { attemptCompletion, DIALECTS } from "@kiln/storage/testing";
import { meterAttempt } from "../src/domain/hosts/meter-attempt.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { startLineageStorageSampler } from "../src/domain/usage/lineage-storage-sampler.js";
import { centsPerVcpuSecond } from "../src/domain/usage/usage-ledger.js";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { acceptJob, HOST } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

const at = (text: string) => new Date(`2026-11-${text}Z`);
const GIB = 2 ** 30;

/** Places the only queued job at `start` and finishes it passed `seconds` later (metered by meterAttempt). */
async function runPassed(storage: Storage, tenant: string, start: Date, seconds: number): Promise<string> {
  const job = await acceptJob(storage, { tenant, now: start, repository: "acme/widget" });
  await registerHost(storage, { id: HOST, vcpus: 64, memoryBytes: 128 * GIB, isolation: "sandbox", now: start });
  const placed = await claimNextJob(storage, {
    hostId: HOST,
    freeVcpus: 64,
    vcpusOfSize: VCPUS_OF_SIZE,
    leaseSeconds: 600,
    now: start,
  });
  assert.equal(placed?.job.id, job.id);
  const end = new Date(start.getTime() + seconds * 1000);
  const finished = await finishAttempt(storage, {
    jobId: job.id,
    attempt: placed.attempt.number,
    leaseToken: placed.attempt.lease_token,
    now: end,
    result: attemptCompletion(),
    meter: (attempt) => meterAttempt(attempt, end),
  });
  assert.equal(finished, "finished");
  return job.id;
}

/**
 * The rest of the rate card and the ledger (issue 16): per-size vCPU-second prices, lineage
 * storage byte-hours from hourly samples priced per GiB-month, and operator credits granted
 * through operator.tenants.controls.set — with the export's pages still summing to the report's
 * totals to the unit and cent.
 */
for (const dialect of DIALECTS) {
  describe(`usage ledger: per-size prices, storage, operator credits (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; userId: string; token: string };
    let operator: OperatorClient;
    let passed: string;

    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
      operator = await operatorClient(t.app, t.storage, t.clock.now());
      // 100 s on kiln2-cpu (2 vCPUs): 200 vCPU-seconds on the 3rd.
      passed = await runPassed(t.storage, owner.tenant, at("03T10:00:00.000"), 100);
    });
    after(() => t.close());

    const get = async (url: string) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(owner.token) });
      assert.equal(res.statusCode, 200, res.body);
      return res.json();
    };
    const controls = () => operator.tenantControls(owner.tenant);
    const setControls = (changes: Record<string, unknown>, version?: number) =>
      operator.changeTenantControls(owner.tenant, changes, version);
    const exportAll = async (limit: number) => {
      const pages = [];
      let url = `/api/usage/export?period=2026-11&limit=${limit}`;
      for (;;) {
        const page = await get(url);
        pages.push(page);
        if (page.next_cursor === null) return pages;
        url = `/api/usage/export?cursor=${page.next_cursor}&limit=${limit}`;
      }
    };

    it("a size's own vCPU-second price is what its records are charged; a size left out costs the card's price", async () => {
      const set = await setControls({
        rate_card: {
          cents_per_vcpu_second: 1,
          cents_per_vcpu_second_by_size: { "kiln2-cpu": 0.25 },
          cents_per_gib_month: 720,
        },
      });
      assert.equal(set.statusCode, 200, set.body);
      const report = await get("/api/usage?period=2026-11");
      assert.deepEqual(report.rate_card.cents_per_vcpu_second_by_size, { "kiln2-cpu": 0.25 });
      // 200 vCPU-seconds × 0.25 cents, not × 1.
      assert.equal(report.days[0].amount_cents, 50);
      const [page] = await exportAll(1000);
      assert.equal(page.records[0].amount_cents, 50);
      const card = {
        cents_per_vcpu_second: 1,
        cents_per_gib_month: 0,
        cents_per_vcpu_second_by_size: { "kiln2-cpu": 0.25 },
      };
      assert.equal(centsPerVcpuSecond(card, "kiln8-cpu"), 1);
      assert.equal(centsPerVcpuSecond(card, "kiln2-cpu"), 0.25);
    });

    it("lineage storage: hourly samples of live lineage bytes are byte-hours per day and repository, priced per GiB-month", async () => {
      await recordLineageSave(t.storage, {
        tenantId: owner.tenant,
        repository: "acme/widget",
        class: "test:stable:kiln2-cpu",
        lineage: "lin_usage",
        host: HOST,
        bytes: 2 * GIB,
        generation: 1,
        rootGeneration: 1,
        now: at("03T10:05:00.000"),
        quotaBytes: 100 * GIB,
      });
      // The sampler loop, run once through its own trigger on a clock whose timers never fire.
      const clock: Clock = {
        now: () => at("03T10:10:00.000"),
        after: () => ({ cancel: () => {} }),
        sleep: () => new Promise<void>(() => {}),
      };
      const loop = startLineageStorageSampler({ storage: t.storage, clock, log: silentLogger });
      loop.nudge();
      await loop.stop();
      // A second process sampling the same hour writes nothing; the next two hours are sampled.
      assert.equal(await sampleLineageStorage(t.storage, { now: at("03T10:40:00.000") }), 0);
      assert.equal(await sampleLineageStorage(t.storage, { now: at("03T11:00:00.000") }), 1);
      assert.equal(await sampleLineageStorage(t.storage, { now: at("03T12:00:00.000") }), 1);
      // Purged: no longer held, no longer sampled.
      await purgeLineage(t.storage, {
        tenantId: owner.tenant,
        repository: "acme/widget",
        lineage: "lin_usage",
        now: at("03T12:30:00.000"),
      });
      assert.equal(await sampleLineageStorage(t.storage, { now: at("03T13:00:00.000") }), 0);

      const report = await get("/api/usage?period=2026-11");
      // Three hours × 2 GiB = 6 GiB-hours; at 720 cents a GiB-month (720 GiB-hours) that is 6 cents.
      assert.equal(report.days[0].storage_byte_hours, 6 * GIB);
      assert.equal(report.repositories[0].storage_byte_hours, 6 * GIB);
      assert.equal(report.totals.storage_byte_hours, 6 * GIB);
      assert.equal(report.days[0].amount_cents, 50 + 6);
      const storage = (await exportAll(1000)).flatMap((p) => p.storage);
      assert.deepEqual(storage, [
        { date: "2026-11-03", repository: "acme/widget", byte_hours: 6 * GIB, amount_cents: 6 },
      ]);
    });

    it("an operator credit, granted through controls.set and audited, is an operator_credit adjustment; export totals equal the report's", async () => {
      const refused = await setControls({ credit: { reason: "nothing credited" } });
      assert.equal(refused.statusCode, 400);
      assert.match(refused.json().detail, /body\.changes\.credit/);
      const unknownJob = await setControls({ credit: { reason: "x", vcpu_seconds: 1, job: "job_missing" } });
      assert.equal(unknownJob.statusCode, 400);
      assert.match(unknownJob.json().detail, /body\.changes\.credit\.job/);

      const version = (await controls()).version;
      const granted = await setControls(
        { credit: { reason: "incident 42: slow hosts", vcpu_seconds: 120, amount_cents: 30, job: passed } },
        version,
      );
      assert.equal(granted.statusCode, 200, granted.body);
      // The same update again names a moved-past version: a conflict, never a second credit.
      const retried = await setControls(
        { credit: { reason: "incident 42: slow hosts", vcpu_seconds: 120, amount_cents: 30, job: passed } },
        version,
      );
      assert.equal(retried.statusCode, 409);
      const audit = await listOperatorAuditEntries(t.storage, { limit: 50 });
      assert.ok(
        audit.entries.some(
          (e: { target: string; value: string }) =>
            e.target === `tenant-controls:${owner.tenant}` &&
            /incident 42: slow hosts/.test(e.value) &&
            /performed/.test(e.value),
        ),
        "the credit is in the operator audit",
      );

      const report = await get("/api/usage?period=2026-11");
      assert.equal(report.totals.adjustment_vcpu_seconds, -120);
      assert.equal(report.totals.adjustment_amount_cents, -30);
      assert.equal(report.totals.vcpu_seconds, 200 - 120);
      assert.equal(report.totals.amount_cents, 50 + 6 - 30);
      for (const limit of [1, 1000]) {
        const pages = await exportAll(limit);
        assert.deepEqual(pages[0].totals, report.totals);
        const records = pages.flatMap((p) => p.records);
        const adjustments = pages.flatMap((p) => p.adjustments);
        const storage = pages.flatMap((p) => p.storage);
        const uploads = pages.flatMap((p) => p.uploads);
        const sum = (
          xs: { vcpu_seconds?: number; amount_cents: number | null }[],
          m: "vcpu_seconds" | "amount_cents",
        ) => xs.reduce((n, x) => n + (x[m] ?? 0), 0);
        assert.equal(sum(records, "vcpu_seconds") + sum(adjustments, "vcpu_seconds"), report.totals.vcpu_seconds);
        assert.equal(
          sum(records, "amount_cents") +
            sum(storage, "amount_cents") +
            sum(uploads, "amount_cents") +
            sum(adjustments, "amount_cents"),
          report.totals.amount_cents,
        );
        const credits = adjustments.filter((a: { kind: string }) => a.kind === "operator_credit");
        assert.equal(credits.length, 1, `limit ${limit}`);
        assert.equal(credits[0].job, passed);
        assert.equal(credits[0].vcpu_seconds, -120);
        assert.equal(credits[0].amount_cents, -30);
        assert.match(credits[0].reason, /incident 42: slow hosts/);
        // One record, one credit, one storage record, each on one page, no page over its limit.
        assert.equal(records.length + adjustments.length + storage.length + uploads.length, 3);
        for (const p of pages) {
          assert.ok(p.records.length + p.adjustments.length + p.storage.length + p.uploads.length <= limit);
        }
      }
      // Granted in November, it is not in December's ledger.
      assert.equal((await get("/api/usage?period=2026-12")).totals.adjustment_vcpu_seconds, 0);
    });
  });
}
