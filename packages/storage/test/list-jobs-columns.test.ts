import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  UnknownRow,
} from "kysely";
import {
  createTenant,
  insertJob,
  listJobs,
  readJob,
  readJobDocument,
  readJobManifest,
  readJobRecords,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";
import { jobsTableBytes } from "./queued-jobs.js";

const clock = { now: () => new Date("2026-11-22T07:00:00.000Z") };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 22, 8, minute)).toISOString();

/** Records every statement's compiled SQL and the bytes of every row it read. */
function recorder(storage: Storage) {
  const statements: string[] = [];
  let bytesRead = 0;
  const plugin: KyselyPlugin = {
    transformQuery(args: PluginTransformQueryArgs) {
      statements.push(storage.db.getExecutor().compileQuery(args.node, args.queryId).sql);
      return args.node;
    },
    async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      for (const row of args.result.rows) bytesRead += JSON.stringify(row).length;
      return args.result;
    },
  };
  return { db: storage.db.withPlugin(plugin), statements, bytesRead: () => bytesRead };
}

for (const dialect of DIALECTS) {
  describe(`jobs.list and jobs.get read only what a Job document is made of [${dialect.name}]`, {
    skip: dialect.skip,
  }, () => {
    let storage: Storage;
    // A streamed manifest of 250,000 entries is ~46 MB; 2 MB per job makes the point on both
    // engines (distinct digests, so that PostgreSQL's compression does not make it small).
    const manifest = JSON.stringify(
      Array.from({ length: 20_000 }, (_, i) => ({
        path: `src/m${i}.rs`,
        sha256: createHash("sha256").update(String(i)).digest("hex"),
        bytes: 1,
      })),
    );
    const invocation = JSON.stringify({ operation: "build", arguments: ["x".repeat(100_000)] });

    before(async () => {
      storage = await dialect.openFresh();
      await createTenant(storage, { id: "acme" }, clock.now());
      for (let i = 0; i < 5; i++) {
        await insertJob(storage, {
          id: `job-${i}`,
          tenant_id: "acme",
          repository: "acme/widget",
          branch: "main",
          base_commit: "0".repeat(40),
          head_sha: null,
          size: "kiln2-cpu",
          class: "build/dev/stable",
          description: "cargo build",
          status: "queued",
          submitted_by: "u_test",
          submission_key: `key-${i}`,
          request_hash: "h",
          invocation,
          source_manifest: manifest,
          wall_clock_seconds: 600,
          max_attempts: 3,
          attempts_started: 0,
          accepted_at: at(i),
          queued_at: at(i),
        });
      }
    });
    after(async () => {
      await storage?.close();
    });

    it("never selects the source manifest or the invocation, and reads a few kilobytes per page", async () => {
      assert.ok(manifest.length > 1_000_000);
      const { db, statements, bytesRead } = recorder(storage);
      const page = await listJobs(db, { tenantId: "acme", filters: {}, limit: 50 });
      const records = await readJobRecords(db, page.rows);
      assert.equal(records.length, 5);
      assert.ok(statements.length >= 3, statements.join("\n"));
      for (const sql of statements) {
        assert.doesNotMatch(sql, /source_manifest|invocation/i, sql);
        if (/from "jobs"/.test(sql)) assert.doesNotMatch(sql, /select \*|"jobs"\.\*/i, sql);
      }
      for (const { job } of records) {
        assert.equal("source_manifest" in job, false);
        assert.equal("invocation" in job, false);
      }
      assert.ok(bytesRead() < 20_000, `a page of 5 jobs read ${bytesRead()} bytes`);
    });

    it("the jobs table holds no manifest: its rows stay small, the manifests live in job_manifests", async () => {
      // On SQLite a column past a large one is reached through its overflow pages, so a row that
      // held the manifest cost every read of the job its megabytes (issue 33).
      const jobsTable = await jobsTableBytes(storage);
      // Five jobs' rows (their 100 kB invocations among them) take less than one of their manifests.
      assert.ok(jobsTable < manifest.length, `the jobs table of 5 jobs takes ${jobsTable} bytes`);
      const record = await readJob(storage, { tenantId: "acme", jobId: "job-2" });
      assert.equal("source_manifest" in (record?.job ?? {}), false);
      assert.equal(await readJobManifest(storage, "job-2"), manifest);
      assert.equal(await readJobManifest(storage, "job-none"), undefined);
    });

    it("jobs.get's read: one job's document, without its manifest, invocation or artifacts; nothing for another tenant", async () => {
      await createTenant(storage, { id: "globex" }, clock.now());
      const { db, statements, bytesRead } = recorder(storage);
      const record = await readJobDocument(db, { tenantId: "acme", jobId: "job-3" });
      assert.equal(record?.job.id, "job-3");
      assert.equal(record?.job.status, "queued");
      assert.deepEqual(record?.attempts, []);
      assert.equal("source_manifest" in (record?.job ?? {}), false);
      assert.equal(statements.length, 3, statements.join("\n"));
      for (const sql of statements) {
        assert.doesNotMatch(sql, /source_manifest|invocation|artifacts/i, sql);
        if (/from "jobs"/.test(sql)) assert.doesNotMatch(sql, /select \*|"jobs"\.\*/i, sql);
      }
      assert.ok(bytesRead() < 2_000, `one job read ${bytesRead()} bytes`);
      assert.equal(await readJobDocument(db, { tenantId: "globex", jobId: "job-3" }), undefined);
      assert.equal(await readJobDocument(db, { tenantId: "acme", jobId: "job-none" }), undefined);
    });
  });
}
