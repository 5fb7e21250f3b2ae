import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  createTenant,
  executorOf,
  insertJob,
  listDogfoodIncidents,
  listTrialLedger,
  openDogfoodGate,
  recordDogfoodIncident,
  recordDogfoodIncidentIssue,
  recordDogfoodSpend,
  resolveDogfoodIncident,
  type Storage,
} from "../src/index.js";
import { DIALECTS, type TestDatabase } from "./dialects.js";

/**
 * The dogfood trial's storage verbs: each recording is keyed and kept once — two processes
 * recording the same key both read back the one row stored, exactly one of them inserted it —
 * and the ledger read gives the trial tenants' jobs, attempts and settlement transitions only.
 */
const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = T0.toISOString();

for (const dialect of DIALECTS) {
  describe(`dogfood trial records [${dialect.name}]`, { skip: dialect.skip }, () => {
    async function withTwo(test: (a: Storage, b: Storage) => Promise<void>) {
      const database: TestDatabase = await dialect.createDatabase();
      const a = await database.open({ maxConnections: 2 });
      const b = await database.open({ maxConnections: 2 });
      try {
        await test(a, b);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await database.dispose();
      }
    }
    const incident = (id: string, detail: string) => ({
      id,
      class: "duplicate_charge",
      occurred_at: at,
      service_blocking: 0,
      detail,
      records: JSON.stringify(["shadow:job_1"]),
      recorded_by: "platform",
      recorded_at: at,
    });

    it("two processes recording the same incident keep one row; exactly one of them inserted it", async () => {
      await withTwo(async (a, b) => {
        const [first, second] = await Promise.all([
          a.transaction((trx) => recordDogfoodIncident(trx, incident("i-1", "from a"))),
          b.transaction((trx) => recordDogfoodIncident(trx, incident("i-1", "from b"))),
        ]);
        assert.equal([first.inserted, second.inserted].filter(Boolean).length, 1);
        assert.deepEqual(first.row, second.row, "both read back the one stored row");
        assert.equal((await listDogfoodIncidents(a)).length, 1);
      });
    });

    it("an issue and a resolution apply once; the later call reads the applied one", async () => {
      await withTwo(async (a, b) => {
        await recordDogfoodIncident(a, incident("i-2", "x"));
        const [one, two] = await Promise.all([
          recordDogfoodIncidentIssue(a, {
            incident: "i-2",
            number: 7,
            filedAt: at,
            recordedBy: "op-a",
            recordedAt: at,
          }),
          recordDogfoodIncidentIssue(b, {
            incident: "i-2",
            number: 8,
            filedAt: at,
            recordedBy: "op-b",
            recordedAt: at,
          }),
        ]);
        assert.equal([one?.applied, two?.applied].filter(Boolean).length, 1);
        assert.equal(one?.row.issue_number, two?.row.issue_number);
        assert.equal(
          await recordDogfoodIncidentIssue(a, {
            incident: "none",
            number: 1,
            filedAt: at,
            recordedBy: "op",
            recordedAt: at,
          }),
          undefined,
        );

        const resolved = await resolveDogfoodIncident(a, {
          incident: "i-2",
          detail: "fixed",
          resolvedBy: "op-a",
          resolvedAt: at,
        });
        assert.equal(resolved?.applied, true);
        const again = await resolveDogfoodIncident(b, {
          incident: "i-2",
          detail: "other",
          resolvedBy: "op-b",
          resolvedAt: at,
        });
        assert.equal(again?.applied, false);
        assert.equal(again?.row.resolution_detail, "fixed");
      });
    });

    it("the gate opens once and spend lines are kept per month and source", async () => {
      await withTwo(async (a, b) => {
        const [x, y] = await Promise.all([
          openDogfoodGate(a, { openedAt: at, openedBy: "op-a" }),
          openDogfoodGate(b, { openedAt: new Date(T0.getTime() + 1000).toISOString(), openedBy: "op-b" }),
        ]);
        assert.equal([x.inserted, y.inserted].filter(Boolean).length, 1);
        assert.equal(x.row.opened_at, y.row.opened_at);
        const line = { month: "2026-11", source: "plan", amount_cents: 100, recorded_by: "op", recorded_at: at };
        assert.equal((await recordDogfoodSpend(a, line)).inserted, true);
        const replay = await recordDogfoodSpend(b, { ...line, amount_cents: 200 });
        assert.equal(replay.inserted, false);
        assert.equal(replay.row.amount_cents, 100, "the first line stays; the caller tells a conflict");
      });
    });

    it("the trial ledger holds the trial tenants' jobs and each settlement transition, no other tenant's", async () => {
      await withTwo(async (a) => {
        for (const id of ["kiln-dogfood", "kiln-canary", "acme"]) await createTenant(a, { id }, T0);
        const jobs: string[] = [];
        for (const [n, tenant] of ["kiln-dogfood", "kiln-canary", "acme"].entries()) {
          const { job } = await insertJob(a, {
            id: `job_${n}`,
            tenant_id: tenant,
            repository: "kiln/kiln",
            branch: "main",
            base_commit: "0".repeat(40),
            head_sha: null,
            size: "kiln2-cpu",
            class: "test:stable:kiln2-cpu",
            description: "cargo test",
            status: "queued",
            submitted_by: "u",
            submission_key: `k-${n}`,
            request_hash: `h-${n}`,
            invocation: "{}",
            source_manifest: "[]",
            wall_clock_seconds: 60,
            max_attempts: 1,
            attempts_started: 0,
            accepted_at: at,
            queued_at: at,
            admitted: null,
            retry_of: null,
          });
          jobs.push(job.id);
          // Two settlements of each: what the trial's audit calls a duplicate charge.
          for (const position of [100, 101]) {
            await executorOf(a)
              .insertInto("job_transitions")
              .values({ job_id: job.id, position, from_status: "running", to_status: "passed", at, reason: "settled" })
              .execute();
          }
        }
        const ledger = await listTrialLedger(a, { tenantIds: ["kiln-dogfood", "kiln-canary"] });
        assert.deepEqual(ledger.jobs.map((j) => j.id).sort(), [jobs[0], jobs[1]].sort());
        assert.deepEqual(
          ledger.settlements.map((s) => [s.job_id, s.position]),
          [
            [jobs[0], 100],
            [jobs[0], 101],
            [jobs[1], 100],
            [jobs[1], 101],
          ],
          "only transitions into a terminal status, the queued one left out",
        );
        assert.deepEqual(await listTrialLedger(a, { tenantIds: [] }), { jobs: [], attempts: [], settlements: [] });
      });
    });
  });
}
