import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  appendLogRecords,
  createTenant,
  insertJob,
  locateAttemptLogLines,
  readLogRecords,
  type Storage,
} from "../src/index.js";
import { DIALECTS, type TestDatabase } from "./dialects.js";

const T0 = new Date("2026-11-25T07:00:00.000Z");

/**
 * A build's output is whatever its programs print, NUL bytes included (a test printing a C
 * string's buffer, a binary dumped to the terminal). PostgreSQL's text refuses U+0000 where
 * SQLite stores it, so the log verb writes every NUL as U+2400 (␀, the symbol for null) on both
 * engines: the line is kept, readable, and the same whichever engine holds it.
 */
for (const dialect of DIALECTS) {
  describe(`log records [${dialect.name}]`, { skip: dialect.skip }, () => {
    async function withJob(test: (storage: Storage, jobId: string) => Promise<void>) {
      const database: TestDatabase = await dialect.createDatabase();
      const storage = await database.open({ maxConnections: 2 });
      try {
        await createTenant(storage, { id: "acme" }, T0);
        const { job } = await insertJob(storage, {
          id: "job_nul",
          tenant_id: "acme",
          repository: "acme/widget",
          branch: "main",
          base_commit: "0123456789abcdef0123456789abcdef01234567",
          head_sha: null,
          size: "kiln2-cpu",
          class: "test:stable:kiln2-cpu",
          description: "cargo test",
          status: "queued",
          submitted_by: "u_test",
          submission_key: "nul-1",
          request_hash: "hash-nul-1",
          invocation: JSON.stringify({ operation: "test", arguments: [] }),
          source_manifest: "[]",
          wall_clock_seconds: 3600,
          max_attempts: 1,
          attempts_started: 0,
          accepted_at: T0.toISOString(),
          queued_at: T0.toISOString(),
          admitted: null,
          retry_of: null,
        });
        await test(storage, job.id);
      } finally {
        await storage.close();
        await database.dispose();
      }
    }

    it("keeps a line with NUL bytes, each written as U+2400, and the lines around it", async () => {
      await withJob(async (storage, jobId) => {
        const accepted = await appendLogRecords(storage, {
          jobId,
          attempt: 1,
          leaseToken: null,
          lines: [
            { stream: "stdout", at: T0, text: "before" },
            { stream: "stdout", at: T0, text: "buffer: a\u0000b\u0000\u0000c" },
            { stream: "stderr", at: T0, text: "after" },
          ],
        });
        assert.equal(accepted, true);
        const { records } = await readLogRecords(storage, { jobId, afterSequence: 0, limit: 10 });
        assert.deepEqual(
          records.map((r) => [r.sequence, r.stream, r.text]),
          [
            [1, "stdout", "before"],
            [2, "stdout", "buffer: a\u2400b\u2400\u2400c"],
            [3, "stderr", "after"],
          ],
        );
      });
    });

    it("appends 12,000 lines in one call (more values than one SQLite or PostgreSQL statement binds), in order", async () => {
      // A host that fell behind ships what it holds at once: a test printing 5,000 lines, re-run
      // twice, made one batch of 10,041 lines that SQLite refused ("too many SQL variables").
      await withJob(async (storage, jobId) => {
        const count = 12_000;
        const lines = Array.from({ length: count }, (_, i) => ({
          stream: "stdout" as const,
          at: T0,
          text: `line ${i}`,
        }));
        assert.equal(await appendLogRecords(storage, { jobId, attempt: 1, leaseToken: null, lines }), true);
        const tail = await readLogRecords(storage, { jobId, afterSequence: count - 2, limit: 10 });
        assert.deepEqual(
          tail.records.map((r) => [r.sequence, r.text]),
          [
            [count - 1, `line ${count - 2}`],
            [count, `line ${count - 1}`],
          ],
        );
      });
    });

    it("finds an attempt's line by its place in that attempt's log, and nothing past its end or for another attempt", async () => {
      await withJob(async (storage, jobId) => {
        const line = (text: string) => ({ stream: "stdout" as const, at: T0, text });
        await appendLogRecords(storage, {
          jobId,
          attempt: 1,
          leaseToken: null,
          lines: [line("a1 one"), line("a1 two")],
        });
        await appendLogRecords(storage, {
          jobId,
          attempt: 2,
          leaseToken: null,
          lines: [line("a2 one"), line("a2 two"), line("a2 three")],
        });
        const found = await locateAttemptLogLines(storage, {
          jobId,
          places: [
            { attempt: 1, place: 2 },
            { attempt: 2, place: 1 },
            { attempt: 2, place: 3 },
            { attempt: 1, place: 3 },
            { attempt: 2, place: 4 },
            { attempt: 3, place: 1 },
          ],
        });
        assert.deepEqual(Object.fromEntries(found), {
          "1:2": { sequence: 2, text: "a1 two" },
          "2:1": { sequence: 3, text: "a2 one" },
          "2:3": { sequence: 5, text: "a2 three" },
        });
      });
    });
  });
}
