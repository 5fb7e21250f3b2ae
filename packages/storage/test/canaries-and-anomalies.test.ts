import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  claimNextJob,
  createTenant,
  disposeTenantAnomaly,
  findCanaryByJob,
  HOST_SEEN_EVERY_SECONDS,
  insertJob,
  listCanaryOutcomes,
  listTenantAnomalies,
  raiseTenantAnomaly,
  readHostCapacity,
  readMigrationState,
  recordCanarySubmission,
  registerHost,
  reserveCanary,
  type Storage,
} from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS, type TestDatabase } from "./dialects.js";

/**
 * Canaries, host pinning and tenant anomaly flags (migration 0015) as the storage verbs keep
 * them: a job whose submission key a canary reserved waits for that host only; a canary slot is
 * reserved once per host; a flag is raised once per rule, tenant and subject; a disposition
 * changes the flag's row only; a claim records its host as seen.
 */
const T0 = new Date("2026-11-22T07:00:00.000Z");
const TENANT = "kiln-canary";
const VCPUS = { "kiln2-cpu": 2 };
let submissions = 0;

async function enqueue(storage: Storage, submissionKey: string): Promise<string> {
  submissions += 1;
  const at = new Date(T0.getTime() + submissions).toISOString();
  const { job } = await insertJob(
    storage,
    queuedJob(
      {
        id: `job_canary_${submissions}`,
        tenant: TENANT,
        submissionKey,
        requestHash: `hash-${submissions}`,
        queuedAt: at,
      },
      {
        repository: "kiln-canary/canary",
        branch: "canary",
        base_commit: "0000000000000000000000000000000000000000",
        description: "cargo test",
        submitted_by: "agent:canary",
      },
    ),
  );
  return job.id;
}

for (const dialect of DIALECTS) {
  describe(`canaries and tenant anomalies [${dialect.name}]`, { skip: dialect.skip }, () => {
    async function withStorage(test: (storage: Storage) => Promise<void>) {
      const database: TestDatabase = await dialect.createDatabase();
      const storage = await database.open({ maxConnections: 2 });
      try {
        await createTenant(storage, { id: TENANT }, T0);
        for (const host of ["host-a", "host-b"]) {
          await registerHost(storage, { id: host, vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: T0 });
        }
        await test(storage);
      } finally {
        await storage.close();
        await database.dispose();
      }
    }
    const claim = (storage: Storage, hostId: string, now = T0) =>
      claimNextJob(storage, { hostId, freeVcpus: 8, vcpusOfSize: VCPUS, leaseSeconds: 15, now });

    it("a canary's job is pinned to its host: another host passes it over, its own host takes it", async () => {
      await withStorage(async (storage) => {
        assert.equal(
          await reserveCanary(storage, { id: "canary-1", tenantId: TENANT, hostId: "host-b", dueAt: T0, now: T0 }),
          true,
        );
        const pinned = await enqueue(storage, "canary-1");
        const ordinary = await enqueue(storage, "ordinary-1");
        assert.equal((await claim(storage, "host-a"))?.job.id, ordinary, "host-a skips the older pinned job");
        assert.equal(await claim(storage, "host-a"), undefined, "and never takes it");
        const placed = await claim(storage, "host-b");
        assert.equal(placed?.job.id, pinned);
        assert.equal(placed?.job.pinned_host, "host-b");
        assert.equal(placed?.attempt.host_id, "host-b");
      });
    });

    it("a slot's canary is reserved once per host; outcomes read each host's newest with its job", async () => {
      await withStorage(async (storage) => {
        const slot2 = new Date(T0.getTime() + 300_000);
        const reserve = (id: string, hostId: string, dueAt: Date) =>
          reserveCanary(storage, { id, tenantId: TENANT, hostId, dueAt, now: dueAt });
        assert.equal(await reserve("c-a1", "host-a", T0), true);
        assert.equal(await reserve("c-a1-again", "host-a", T0), false, "a second reservation of the slot loses");
        assert.equal(await reserve("c-b1", "host-b", T0), true);
        assert.equal(await reserve("c-a2", "host-a", slot2), true);
        const job = await enqueue(storage, "c-a2");
        await recordCanarySubmission(storage, { id: "c-a2", jobId: job, now: slot2 });
        await recordCanarySubmission(storage, { id: "c-b1", error: "jobs.submit answered 503", now: T0 });

        const newest = await listCanaryOutcomes(storage, { since: T0.toISOString(), perHost: 1 });
        assert.deepEqual(
          newest.map((c) => [c.hostId, c.id, c.jobId, c.job?.status ?? null, c.submissionError]),
          [
            ["host-a", "c-a2", job, "queued", null],
            ["host-b", "c-b1", null, null, "jobs.submit answered 503"],
          ],
        );
        const all = await listCanaryOutcomes(storage, { since: T0.toISOString(), perHost: 5 });
        assert.deepEqual(
          all.map((c) => c.id),
          ["c-a2", "c-a1", "c-b1"],
        );
        assert.equal((await findCanaryByJob(storage, job))?.hostId, "host-a");
        assert.equal(await findCanaryByJob(storage, "job_none"), undefined);
      });
    });

    it("a claim records its host as seen, at most every HOST_SEEN_EVERY_SECONDS", async () => {
      await withStorage(async (storage) => {
        const seen = async () => (await readHostCapacity(storage, { now: T0 })).find((h) => h.id === "host-a");
        const soon = new Date(T0.getTime() + (HOST_SEEN_EVERY_SECONDS - 1) * 1000);
        await claim(storage, "host-a", soon);
        assert.equal((await seen())?.lastHeartbeatAt, T0.toISOString(), "within the period nothing is written");
        const later = new Date(T0.getTime() + (HOST_SEEN_EVERY_SECONDS + 1) * 1000);
        await claim(storage, "host-a", later);
        assert.equal((await seen())?.lastHeartbeatAt, later.toISOString());
        const job = await enqueue(storage, "ordinary-seen");
        assert.equal((await claim(storage, "host-a", later))?.job.id, job);
        const capacity = await readHostCapacity(storage, { now: later });
        assert.deepEqual(
          capacity.map((h) => [h.id, h.runningAttempts, h.vcpusInUse, h.liveLease]),
          [
            ["host-a", 1, 2, true],
            ["host-b", 0, 0, false],
          ],
        );
      });
    });

    it("a flag is raised once per rule, tenant and subject; a disposition changes only the flag", async () => {
      await withStorage(async (storage) => {
        const raise = (id: string, subject: string) =>
          raiseTenantAnomaly(storage, {
            id,
            tenantId: TENANT,
            rule: "submission_burst",
            subject,
            jobId: null,
            evidence: JSON.stringify([{ kind: "k", detail: subject }]),
            now: T0,
          });
        assert.equal(await raise("ta-1", "hour:2026-11-22T07"), true);
        assert.equal(await raise("ta-1", "hour:2026-11-22T07"), false, "raised again: nothing new");
        assert.equal(await raise("ta-other-id", "hour:2026-11-22T07"), false, "same subject under another id");
        assert.equal(await raise("ta-2", "hour:2026-11-22T08"), true);
        const disposed = await disposeTenantAnomaly(storage, {
          id: "ta-1",
          disposition: "dismissed",
          note: "a planned load test",
          actor: "operator",
          now: T0,
        });
        assert.deepEqual(disposed?.disposition, {
          disposition: "dismissed",
          note: "a planned load test",
          disposedBy: "operator",
          disposedAt: T0.toISOString(),
        });
        assert.equal(
          await disposeTenantAnomaly(storage, {
            id: "ta-9",
            disposition: "confirmed",
            note: null,
            actor: "o",
            now: T0,
          }),
          undefined,
        );
        assert.deepEqual(
          (await listTenantAnomalies(storage, { limit: 10 })).map((a) => [a.id, a.disposition?.disposition ?? null]),
          [
            ["ta-2", null],
            ["ta-1", "dismissed"],
          ],
          "undisposed first",
        );
      });
    });

    it("the migration state names the newest migration as applied", async () => {
      await withStorage(async (storage) => {
        const state = await readMigrationState(storage);
        assert.equal(state.applied, state.expected);
        assert.match(state.expected, /^\d{4}-/);
      });
    });
  });
}
