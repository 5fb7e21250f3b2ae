import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import {
  claimNextJob,
  createTenant,
  drainHost,
  insertJob,
  type LineageAffinity,
  raiseHostImpairment,
  reclaimExpiredLeases,
  recordLineageSave,
  registerHost,
  type Storage,
} from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { withTwoStorages } from "./staged-transactions.js";

/**
 * Placement by lineage (claimNextJob's `lineageAffinity`) with two hosts on one database: host-a
 * holds the lineage of acme/widget's test class, host-b holds nothing. Every instant comes from a
 * ManualClock the test moves; no verdict depends on how long anything took.
 */

const T0 = "2026-11-22T07:00:00.000Z";
const TENANT = "acme";
const CLASS = "test:stable:kiln2-cpu";
const AFFINITY: LineageAffinity = { waitSeconds: 45, hostFreshSeconds: 60 };
const VCPUS_OF_SIZE = { "kiln2-cpu": 2, "kiln16-cpu": 16 };

let jobs = 0;
async function enqueue(storage: Storage, id: string, clock: ManualClock, repository = "acme/widget"): Promise<void> {
  jobs += 1;
  const { created } = await insertJob(
    storage,
    queuedJob(
      { id, tenant: TENANT, submissionKey: `p-${jobs}`, requestHash: `h-${jobs}`, queuedAt: clock.now().toISOString() },
      { repository },
    ),
  );
  assert.ok(created);
}

function claim(storage: Storage, hostId: string, clock: ManualClock, affinity: LineageAffinity | null = AFFINITY) {
  return claimNextJob(storage, {
    hostId,
    freeVcpus: 16,
    vcpusOfSize: VCPUS_OF_SIZE,
    leaseSeconds: 60,
    now: clock.now(),
    ...(affinity === null ? {} : { lineageAffinity: affinity }),
  });
}

/** A fresh database with both hosts seen at T0 and the widget's lineage saved by `holder`. */
async function withHosts(
  dialect: (typeof DIALECTS)[number],
  test: (a: Storage, b: Storage, clock: ManualClock) => Promise<void>,
  options: { holder?: string; holderVcpus?: number } = {},
): Promise<void> {
  await withTwoStorages(dialect, async (a, b) => {
    const clock = new ManualClock(T0);
    await createTenant(a, { id: TENANT }, clock.now());
    const holder = options.holder ?? "host-a";
    for (const id of ["host-a", "host-b"]) {
      const vcpus = id === holder ? (options.holderVcpus ?? 16) : 16;
      await registerHost(a, { id, vcpus, memoryBytes: 2 ** 36, isolation: "sandbox", now: clock.now() });
    }
    await recordLineageSave(a, {
      tenantId: TENANT,
      repository: "acme/widget",
      class: CLASS,
      lineage: "lin_widget",
      host: holder,
      bytes: 2 ** 30,
      generation: 1,
      rootGeneration: 1,
      now: clock.now(),
      quotaBytes: 2 ** 40,
    });
    await test(a, b, clock);
  });
}

for (const dialect of DIALECTS) {
  describe(`placement by lineage [${dialect.name}]`, { skip: dialect.skip }, () => {
    it("the host holding a job's lineage takes it before an older job; the other host takes the older one", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        await enqueue(a, "job_other", clock, "acme/other");
        await clock.advance(1000);
        await enqueue(a, "job_widget", clock);
        assert.equal((await claim(a, "host-a", clock))?.job.id, "job_widget");
        assert.equal((await claim(b, "host-b", clock))?.job.id, "job_other");
      });
    });

    it("a job waits for its live lineage host up to the bound, then any host takes it", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        await enqueue(a, "job_widget", clock);
        assert.equal(await claim(b, "host-b", clock), undefined, "host-a is live and admitting: the job waits for it");
        await clock.advance((AFFINITY.waitSeconds - 1) * 1000);
        assert.equal(await claim(b, "host-b", clock), undefined, "still within the bound");
        await clock.advance(1000);
        const placed = await claim(b, "host-b", clock);
        assert.equal(placed?.job.id, "job_widget", "the bound passed: host-b takes it (cold)");
        assert.equal(placed?.attempt.host_id, "host-b");
      });
    });

    it("without affinity settings, jobs go oldest first to any host (no wait, no preference)", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        await enqueue(a, "job_other", clock, "acme/other");
        await clock.advance(1000);
        await enqueue(a, "job_widget", clock);
        assert.equal((await claim(a, "host-a", clock, null))?.job.id, "job_other");
        assert.equal((await claim(b, "host-b", clock, null))?.job.id, "job_widget");
      });
    });

    it("a job whose lineage host is drained is taken at once", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        await a.transaction((trx) =>
          drainHost(trx, { hostId: "host-a", actor: "operator", action: "drain", reason: null, now: clock.now() }),
        );
        await enqueue(a, "job_widget", clock);
        assert.equal((await claim(b, "host-b", clock))?.job.id, "job_widget");
      });
    });

    it("a job whose lineage host's admission an impairment closed is taken at once", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        const raised = await a.transaction((trx) =>
          raiseHostImpairment(
            trx,
            { hostId: "host-a", kind: "missed_heartbeats", evidence: [], now: clock.now() },
            a.capabilities.rowLocks,
          ),
        );
        assert.equal(raised.kind === "raised" && raised.admissionClosed, true);
        await enqueue(a, "job_widget", clock);
        assert.equal((await claim(b, "host-b", clock))?.job.id, "job_widget");
      });
    });

    it("a job whose lineage host is gone (not seen, no live lease) is taken at once; a live lease keeps it live", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        // host-a runs an attempt and renews nothing else: seen at T0 only.
        await enqueue(a, "job_first", clock, "acme/other");
        assert.equal((await claim(a, "host-a", clock))?.job.id, "job_first");
        await clock.advance((AFFINITY.hostFreshSeconds + 1) * 1000);
        // Not seen for longer than hostFreshSeconds, but its attempt's lease (60 s from T0) is
        // expired too: gone.
        await enqueue(a, "job_widget", clock);
        assert.equal((await claim(b, "host-b", clock))?.job.id, "job_widget");
      });
      await withHosts(dialect, async (a, b, clock) => {
        await enqueue(a, "job_first", clock, "acme/other");
        const first = await claimNextJob(a, {
          hostId: "host-a",
          freeVcpus: 16,
          vcpusOfSize: VCPUS_OF_SIZE,
          leaseSeconds: 3600,
          now: clock.now(),
          lineageAffinity: AFFINITY,
        });
        assert.equal(first?.job.id, "job_first");
        await clock.advance((AFFINITY.hostFreshSeconds + 1) * 1000);
        // Not seen lately, but it holds a live lease (busy with a long attempt): still live, so
        // the job waits for it.
        await enqueue(a, "job_widget", clock);
        assert.equal(await claim(b, "host-b", clock), undefined);
        assert.equal((await claim(a, "host-a", clock))?.job.id, "job_widget");
      });
    });

    it("a job whose lineage host let a lease lapse since it was last seen is taken at once, though it was seen lately", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        // host-a runs two attempts: one leased for 20 s, one for an hour.
        for (const [id, leaseSeconds] of [
          ["job_short", 20],
          ["job_long", 3600],
        ] as const) {
          await enqueue(a, id, clock, `acme/${id}`);
          const placed = await claimNextJob(a, {
            hostId: "host-a",
            freeVcpus: 16,
            vcpusOfSize: VCPUS_OF_SIZE,
            leaseSeconds,
            now: clock.now(),
            lineageAffinity: AFFINITY,
          });
          assert.equal(placed?.job.id, id);
        }
        await clock.advance(21_000);
        await enqueue(a, "job_widget", clock);
        assert.equal(await claim(b, "host-b", clock), undefined, "seen 21 s ago: live, the job waits");
        // The short lease lapsed: the reaper records the attempt lost.
        assert.deepEqual(
          (await reclaimExpiredLeases(a, clock.now())).map((r) => r.jobId),
          ["job_short"],
        );
        const placed = await claim(b, "host-b", clock);
        assert.ok(placed && ["job_widget", "job_short"].includes(placed.job.id));
        const next = await claim(b, "host-b", clock);
        assert.deepEqual(
          [placed.job.id, next?.job.id].sort(),
          ["job_short", "job_widget"],
          "host-a stopped renewing: neither waits for it",
        );
      });
    });

    it("a job whose lineage host has too few vCPUs for its size is taken at once", async () => {
      await withHosts(
        dialect,
        async (a, b, clock) => {
          await enqueue(a, "job_widget", clock);
          assert.equal((await claim(b, "host-b", clock))?.job.id, "job_widget");
        },
        { holderVcpus: 1 },
      );
    });

    it("both hosts claiming at once on separate connections: each gets the job meant for it", async () => {
      await withHosts(dialect, async (a, b, clock) => {
        await enqueue(a, "job_other", clock, "acme/other");
        await clock.advance(1000);
        await enqueue(a, "job_widget", clock);
        const [byA, byB] = await Promise.all([claim(a, "host-a", clock), claim(b, "host-b", clock)]);
        assert.equal(byA?.job.id, "job_widget");
        assert.equal(byB?.job.id, "job_other");
      });
    });
  });
}
