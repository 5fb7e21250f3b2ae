import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { sql } from "kysely";
import { createTenant, insertJob, migrateToLatest, readJobManifest, type Storage } from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { migrateToBefore } from "./migrate-to-before.js";
import { insertJobRowBefore0042, jobsTableBytes } from "./queued-jobs.js";

/**
 * A job's source manifest lives in `job_manifests` (migration 0042), out of the job's row: read
 * only by what needs it (placement, a retry's copy, the blob sweep), deleted with its job.
 */

const MIGRATION = "0042-job-manifests";
const T0 = Date.parse("2026-11-29T08:00:00.000Z");
const at = (i: number) => new Date(T0 + i * 1000).toISOString();
const job = (id: string, i: number, source_manifest: Parameters<typeof insertJob>[1]["source_manifest"]) =>
  queuedJob({ id, tenant: "acme", submissionKey: id, requestHash: id, queuedAt: at(i) }, { source_manifest });
/** A manifest of n entries with distinct digests (PostgreSQL's compression leaves it large). */
const manifestOf = (n: number) =>
  JSON.stringify(
    Array.from({ length: n }, (_, i) => ({
      path: `src/m${i}.rs`,
      sha256: createHash("sha256").update(String(i)).digest("hex"),
      bytes: i,
    })),
  );

const columnsOfJobs = async (storage: Storage) =>
  Object.keys((await sql<Record<string, unknown>>`select * from jobs`.execute(storage.db)).rows[0] ?? {});

for (const dialect of DIALECTS) {
  describe(`job manifests [${dialect.name}]`, { skip: dialect.skip }, () => {
    it("a manifest is stored apart from its job, and a retry's is copied by the database", async () => {
      const storage = await dialect.openFresh();
      try {
        await createTenant(storage, { id: "acme" }, new Date(T0));
        const manifest = manifestOf(500);
        const { job: original } = await insertJob(storage, job("original", 0, manifest));
        assert.equal("source_manifest" in original, false);
        assert.deepEqual(await storage.db.selectFrom("job_manifests").select(["job_id", "manifest"]).execute(), [
          { job_id: "original", manifest },
        ]);
        await insertJob(storage, job("retry", 1, { copiedFrom: "original" }));
        assert.equal(await readJobManifest(storage, "retry"), manifest);
        assert.equal(await readJobManifest(storage, "original"), manifest);
        // A copy of a manifest that is not there fails the insert, and nothing of the job is kept.
        await assert.rejects(
          insertJob(storage, job("orphan", 2, { copiedFrom: "no-such-job" })),
          /job no-such-job has no source manifest to copy to job orphan/,
        );
        assert.equal(
          await storage.db.selectFrom("jobs").select("id").where("id", "=", "orphan").executeTakeFirst(),
          undefined,
        );
      } finally {
        await storage.close();
      }
    });

    it("deleting a job deletes its manifest", async () => {
      const storage = await dialect.openFresh();
      try {
        await createTenant(storage, { id: "acme" }, new Date(T0));
        await insertJob(storage, job("gone", 0, manifestOf(10)));
        await insertJob(storage, job("kept", 1, manifestOf(20)));
        await storage.transaction(async (trx) => {
          await trx.deleteFrom("job_transitions").where("job_id", "=", "gone").execute();
          await trx.deleteFrom("jobs").where("id", "=", "gone").execute();
        });
        assert.deepEqual(await storage.db.selectFrom("job_manifests").select("job_id").execute(), [{ job_id: "kept" }]);
        assert.equal(await readJobManifest(storage, "kept"), manifestOf(20));
      } finally {
        await storage.close();
      }
    });

    it("migrating moves every job's manifest out of its row, and back down", async () => {
      const database = await dialect.createDatabase();
      const storage = await database.open();
      try {
        const migrateBackDown = await migrateToBefore(storage, MIGRATION);
        await createTenant(storage, { id: "acme" }, new Date(T0));
        const manifests = { small: "[]", large: manifestOf(20_000) };
        await insertJobRowBefore0042(storage.db, job("small", 0, manifests.small));
        await insertJobRowBefore0042(storage.db, job("large", 1, manifests.large));
        assert.ok((await columnsOfJobs(storage)).includes("source_manifest"));
        assert.ok((await jobsTableBytes(storage)) > manifests.large.length / 2);

        assert.ok((await migrateToLatest(storage)).applied.includes(MIGRATION));
        assert.equal((await columnsOfJobs(storage)).includes("source_manifest"), false);
        // The manifests' bytes left the jobs table (on PostgreSQL once vacuumed: the migration
        // emptied the column before dropping it, or its TOAST would stay with the rows).
        assert.ok((await jobsTableBytes(storage)) < manifests.large.length / 10);
        assert.equal(await readJobManifest(storage, "small"), manifests.small);
        assert.equal(await readJobManifest(storage, "large"), manifests.large);

        await migrateBackDown();
        const rows = await sql<{ id: string; source_manifest: string }>`
          select id, source_manifest from jobs order by id
        `.execute(storage.db);
        assert.deepEqual(rows.rows, [
          { id: "large", source_manifest: manifests.large },
          { id: "small", source_manifest: manifests.small },
        ]);
      } finally {
        await storage.close();
        await database.dispose();
      }
    });
  });
}
