import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sql } from "kysely";
import {
  createTenant,
  insertJob,
  latestJobEventSequence,
  migrateToLatest,
  readJobEvents,
  recordTransition,
  type Storage,
} from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { migrateToBefore } from "./migrate-to-before.js";
import { blockedOrSettled, held, withTwoStorages } from "./staged-transactions.js";

/**
 * The tenant job event feed's numbering (record-transition.ts, read-job-events.ts, migration
 * 0030): each tenant's sequence is its own, so another tenant's activity neither moves it nor
 * shows in it, and one tenant's events commit in sequence order.
 */

const MIGRATION = "0030-job-event-tenant-sequence";
const T0 = "2026-11-22T07:00:00.000Z";
let jobs = 0;

async function acceptJob(storage: Storage, tenant: string): Promise<string> {
  jobs += 1;
  const id = `job-${tenant}-${jobs}`;
  await insertJob(storage, queuedJob({ id, tenant, submissionKey: id, requestHash: id, queuedAt: T0 }));
  return id;
}

const moved = (jobId: string, tenantId: string) => ({
  jobId,
  tenantId,
  repository: "acme/widget",
  from: "queued",
  to: "queued",
  at: new Date(T0),
  reason: "annotated",
});

async function sequencesOf(storage: Storage, tenantId: string): Promise<number[]> {
  const rows = await readJobEvents(storage, { tenantId, afterSequence: 0, limit: 1000 });
  for (const row of rows) assert.equal(row.tenant_id, tenantId);
  return rows.map((r) => r.sequence);
}

for (const dialect of DIALECTS) {
  describe(`job event sequences [${dialect.name}]`, { skip: dialect.skip }, () => {
    it("tenant B's events do not move tenant A's sequence, nor show in A's feed", async () => {
      const storage = await dialect.openFresh();
      try {
        for (const id of ["a", "b"]) await createTenant(storage, { id, displayName: id }, new Date(T0));
        assert.equal(await latestJobEventSequence(storage, "a"), 0);
        const a1 = await acceptJob(storage, "a"); // a: 1
        for (let i = 0; i < 5; i++) await acceptJob(storage, "b"); // b: 1..5
        const a2 = await acceptJob(storage, "a"); // a: 2
        const b6 = await acceptJob(storage, "b"); // b: 6
        await storage.transaction(async (trx) => {
          await recordTransition(trx, moved(b6, "b")); // b: 7
          await recordTransition(trx, moved(a1, "a")); // a: 3
          await recordTransition(trx, moved(a2, "a")); // a: 4
        });
        assert.deepEqual(await sequencesOf(storage, "a"), [1, 2, 3, 4]);
        assert.deepEqual(await sequencesOf(storage, "b"), [1, 2, 3, 4, 5, 6, 7]);
        assert.equal(await latestJobEventSequence(storage, "a"), 4);
        assert.equal(await latestJobEventSequence(storage, "b"), 7);
        // Resuming after a sequence gives exactly the tenant's later events.
        const after2 = await readJobEvents(storage, { tenantId: "a", afterSequence: 2, limit: 10 });
        assert.deepEqual(
          after2.map((r) => [r.sequence, r.job_id]),
          [
            [3, a1],
            [4, a2],
          ],
        );
        // A rolled-back move takes no number.
        await assert.rejects(
          storage.transaction(async (trx) => {
            await recordTransition(trx, moved(a1, "a"));
            throw new Error("rolled back");
          }),
          /rolled back/,
        );
        await acceptJob(storage, "a");
        assert.deepEqual(await sequencesOf(storage, "a"), [1, 2, 3, 4, 5]);
      } finally {
        await storage.close();
      }
    });

    it("moves of one tenant never wait for each other, and are numbered in the order they commit", {
      skip:
        dialect.name === "sqlite"
          ? "one writer at a time: every move waits, and commit order is sequence order"
          : false,
    }, async () => {
      await withTwoStorages(dialect, async (main, other) => {
        await createTenant(main, { id: "a", displayName: "a" }, new Date(T0));
        const a1 = await acceptJob(main, "a");
        const a2 = await acceptJob(main, "a");
        // The first move is recorded and held open, uncommitted; a second of the same tenant
        // commits meanwhile without waiting for it, and takes the next number.
        const slow = held(main);
        const slowCommit = slow.storage.transaction((trx) => recordTransition(trx, moved(a1, "a")));
        await slow.ready;
        const fast = other.transaction((trx) => recordTransition(trx, moved(a2, "a")));
        assert.equal(await blockedOrSettled(other, fast), "settled", "the second move did not wait for the first");
        await fast;
        const beforeSlow = await readJobEvents(other, { tenantId: "a", afterSequence: 2, limit: 10 });
        assert.deepEqual(
          beforeSlow.map((r) => [r.sequence, r.job_id]),
          [[3, a2]],
        );
        slow.release();
        await slowCommit;
        // The held move, committed last, comes after what a reader has already seen.
        const rest = await readJobEvents(other, { tenantId: "a", afterSequence: 3, limit: 10 });
        assert.deepEqual(
          rest.map((r) => [r.sequence, r.job_id]),
          [[4, a1]],
        );
        assert.equal(await latestJobEventSequence(other, "a"), 4);
      });
    });

    it("migrating keeps the numbers events had, and counts on from each tenant's highest", async () => {
      const database = await dialect.createDatabase();
      const storage = await database.open();
      try {
        await migrateToBefore(storage, MIGRATION);
        for (const id of ["a", "b"]) await createTenant(storage, { id, displayName: id }, new Date(T0));
        // Before 0030: one platform-wide sequence, a's events at 1 and 3, b's at 2.
        for (const [tenant, job] of [
          ["a", "ja1"],
          ["b", "jb1"],
          ["a", "ja2"],
        ] as const) {
          await sql`
            insert into job_events (tenant_id, job_id, repository, status, previous_status, at)
            values (${tenant}, ${job}, 'acme/widget', 'queued', null, ${T0})
          `.execute(storage.db);
        }
        assert.ok((await migrateToLatest(storage)).applied.includes(MIGRATION));
        assert.deepEqual(await sequencesOf(storage, "a"), [1, 3]);
        assert.deepEqual(await sequencesOf(storage, "b"), [2]);
        assert.equal(await latestJobEventSequence(storage, "a"), 3);
        await acceptJob(storage, "a");
        await acceptJob(storage, "b");
        assert.deepEqual(await sequencesOf(storage, "a"), [1, 3, 4]);
        assert.deepEqual(await sequencesOf(storage, "b"), [2, 3]);
      } finally {
        await storage.close();
        await database.dispose();
      }
    });
  });
}
