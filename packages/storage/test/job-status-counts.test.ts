import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CompiledQuery, sql } from "kysely";
import {
  type AttemptRow,
  claimNextJob,
  createTenant,
  finishAttempt,
  insertJob,
  type JobFilters,
  type JobRow,
  listJobs,
  migrateToLatest,
  reclaimExpiredLeases,
  recordTransition,
  requestCancellation,
  type Storage,
} from "../src/index.js";
import { attemptCompletion, queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { migrateToBefore } from "./migrate-to-before.js";
import { insertJobRowBefore0042, jobRowOf } from "./queued-jobs.js";
import { blockedOrSettled, held, withTwoStorages } from "./staged-transactions.js";

/**
 * Each tenant's jobs by status, kept by triggers on jobs (migration 0037) and read by every
 * jobs.list page (list-jobs.ts) instead of counting the tenant's jobs. A count that drifts from
 * the jobs is a wrong `total` or `summary` on every page after it, so the counters are compared
 * with a real count(*) after many random moves — through the verbs and through raw writes.
 */

const MIGRATION = "0037-job-status-counts";
const T0 = Date.parse("2026-11-27T08:00:00.000Z");
const TENANTS = ["a", "b", "c"] as const;
const STATUSES = ["queued", "running", "passed", "failed", "cancellation_requested", "cancelled"] as const;
const LEASE = 30;

/** Mulberry32: the same moves for the same seed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Counts = Record<string, Record<string, number>>;

function add(counts: Counts, tenant: string, status: string, n: number): void {
  const byStatus = counts[tenant] ?? {};
  byStatus[status] = n;
  counts[tenant] = byStatus;
}

async function countedByJobs(storage: Storage): Promise<Counts> {
  const rows = await sql<{ tenant_id: string; status: string; n: number | string }>`
    select tenant_id, status, count(*) as n from jobs group by tenant_id, status
  `.execute(storage.db);
  const counts: Counts = {};
  for (const r of rows.rows) add(counts, r.tenant_id, r.status, Number(r.n));
  return counts;
}

async function keptByCounters(storage: Storage): Promise<Counts> {
  const rows = await storage.db.selectFrom("job_status_counts").selectAll().execute();
  const counts: Counts = {};
  for (const r of rows) {
    assert.ok(Number(r.jobs) >= 0, `${r.tenant_id} ${r.status}: ${r.jobs} jobs`);
    if (Number(r.jobs) > 0) add(counts, r.tenant_id, r.status, Number(r.jobs));
  }
  return counts;
}

/** The counters equal a real count, and jobs.list's total and summary are those counts. */
async function assertCountsTrue(storage: Storage, when: string): Promise<void> {
  const real = await countedByJobs(storage);
  assert.deepEqual(await keptByCounters(storage), real, when);
  for (const tenant of TENANTS) {
    const page = await listJobs(storage, { tenantId: tenant, filters: { status: "queued" }, limit: 1 });
    const byStatus = real[tenant] ?? {};
    assert.deepEqual(page.summary, byStatus, `${when}: ${tenant}'s summary`);
    assert.equal(
      page.total,
      Object.values(byStatus).reduce((a, b) => a + b, 0),
      `${when}: ${tenant}'s total`,
    );
  }
}

for (const dialect of DIALECTS) {
  describe(`job status counts [${dialect.name}]`, { skip: dialect.skip }, () => {
    it("stay equal to a real count through many random moves, by the verbs and by raw writes", async () => {
      const seed = Number(process.env.KILN_STATUS_COUNTS_SEED ?? Date.now() % 100_000);
      console.log(`job status counts [${dialect.name}]: seed ${seed} (KILN_STATUS_COUNTS_SEED)`);
      const next = random(seed);
      const pick = <T>(items: readonly T[]): T | undefined => items[Math.floor(next() * items.length)];
      const storage = await dialect.openFresh();
      try {
        for (const id of TENANTS) await createTenant(storage, { id, displayName: id }, new Date(T0));
        let step = 0;
        let made = 0;
        const now = () => new Date(T0 + step * 1000);
        const leases = new Map<string, AttemptRow>();
        const newRow = (tenant: string) => {
          made += 1;
          const id = `job-${made}`;
          const at = now().toISOString();
          return queuedJob({ id, tenant, submissionKey: id, requestHash: id, queuedAt: at });
        };
        const jobIds = async () =>
          (await storage.db.selectFrom("jobs").select(["id", "tenant_id", "status"]).execute()) as Pick<
            JobRow,
            "id" | "tenant_id" | "status"
          >[];
        const moves: Record<string, number> = {};
        const raw = async (trx: Parameters<Parameters<Storage["transaction"]>[0]>[0], kind: string) => {
          const jobs = await trx.selectFrom("jobs").select(["id", "tenant_id", "status"]).execute();
          const job = pick(jobs);
          if (kind === "insert" || job === undefined) {
            await trx
              .insertInto("jobs")
              .values({ ...jobRowOf(newRow(pick(TENANTS) ?? "a")), status: pick(STATUSES) ?? "queued" })
              .execute();
          } else if (kind === "update") {
            await trx
              .updateTable("jobs")
              .set({ status: pick(STATUSES) ?? "queued" })
              .where("id", "=", job.id)
              .execute();
          } else if (kind === "same-status") {
            // Every job's status written with the value it has: nothing moves.
            await trx
              .updateTable("jobs")
              .set((eb) => ({ status: eb.ref("status"), queue_annotation: "unchanged" }))
              .where("tenant_id", "=", job.tenant_id)
              .execute();
          } else {
            for (const table of [
              "job_transitions",
              "attempts",
              "log_records",
              "artifacts",
              "check_runs",
              "inline_source_bytes",
            ] as const) {
              await trx.deleteFrom(table).where("job_id", "=", job.id).execute();
            }
            leases.delete(job.id);
            await trx.deleteFrom("jobs").where("id", "=", job.id).execute();
          }
        };
        const ACTIONS = [
          "submit",
          "submit",
          "claim",
          "claim",
          "finish",
          "finish",
          "cancel",
          "reclaim",
          "raw",
          "raw-batch",
          "rolled-back",
        ] as const;
        for (step = 1; step <= 400; step++) {
          const action = pick(ACTIONS) ?? "submit";
          moves[action] = (moves[action] ?? 0) + 1;
          if (action === "submit") {
            await insertJob(storage, newRow(pick(TENANTS) ?? "a"));
          } else if (action === "claim") {
            const placed = await claimNextJob(storage, {
              hostId: "h1",
              freeVcpus: 64,
              vcpusOfSize: { "kiln2-cpu": 2 },
              leaseSeconds: LEASE,
              now: now(),
            });
            if (placed !== undefined) leases.set(placed.job.id, placed.attempt);
          } else if (action === "finish") {
            const attempt = pick([...leases.values()]);
            if (attempt === undefined) continue;
            leases.delete(attempt.job_id);
            await finishAttempt(storage, {
              jobId: attempt.job_id,
              attempt: attempt.number,
              leaseToken: attempt.lease_token,
              now: now(),
              result: attemptCompletion(pick(["passed", "failed", "cancelled"] as const) ?? "passed"),
              meter: (m) => ({ size: m.size, seconds: 1, vcpuSeconds: 2 }),
            });
          } else if (action === "cancel") {
            const job = pick(await jobIds());
            if (job === undefined) continue;
            await requestCancellation(storage, { tenantId: job.tenant_id, jobId: job.id, by: "u_test", now: now() });
          } else if (action === "reclaim") {
            // Leases granted more than LEASE steps ago expire: their jobs go back to the queue,
            // or settle once cancelled or out of attempts.
            for (const { jobId } of await reclaimExpiredLeases(storage, now())) leases.delete(jobId);
          } else if (action === "raw") {
            await storage.transaction((trx) =>
              raw(trx, pick(["insert", "update", "delete", "same-status"]) ?? "update"),
            );
          } else if (action === "raw-batch") {
            // Several rows in one transaction, some of them moved more than once.
            await storage.transaction(async (trx) => {
              for (let i = 0; i < 6; i++) await raw(trx, pick(["insert", "update", "update", "delete"]) ?? "update");
              await trx
                .updateTable("jobs")
                .set({ status: pick(STATUSES) ?? "queued" })
                .where("tenant_id", "=", pick(TENANTS) ?? "a")
                .where("status", "=", pick(STATUSES) ?? "queued")
                .execute();
            });
          } else {
            const before = await countedByJobs(storage);
            await assert.rejects(
              storage.transaction(async (trx) => {
                await raw(trx, "insert");
                await raw(trx, "update");
                throw new Error("rolled back");
              }),
              /rolled back/,
            );
            assert.deepEqual(await countedByJobs(storage), before);
          }
          if (step % 25 === 0) await assertCountsTrue(storage, `seed ${seed}, step ${step} (${action})`);
        }
        await assertCountsTrue(storage, `seed ${seed}, at the end`);
        // The run moved jobs through every status and path it means to test.
        const statuses = new Set((await jobIds()).map((j) => j.status));
        assert.ok(statuses.size >= 4, `statuses at the end: ${[...statuses].join(", ")}`);
        for (const action of ACTIONS) assert.ok((moves[action] ?? 0) > 0, `no ${action} in ${JSON.stringify(moves)}`);
        const transitions = await sql<{ n: number | string }>`
          select count(*) as n from job_transitions where reason like 'cancelled by%' or reason like 'attempt%lost%'
        `.execute(storage.db);
        assert.ok(Number(transitions.rows[0]?.n) > 0, "cancellations and lost attempts were among the moves");
      } finally {
        await storage.close();
      }
    });

    it("a page reads the kept counts: no statement of jobs.list counts jobs", async () => {
      const storage = await dialect.openFresh();
      try {
        await createTenant(storage, { id: "a", displayName: "a" }, new Date(T0));
        for (let i = 0; i < 3; i++) {
          const id = `job-${i}`;
          await insertJob(
            storage,
            queuedJob({
              id,
              tenant: "a",
              submissionKey: id,
              requestHash: id,
              queuedAt: new Date(T0 + i).toISOString(),
            }),
          );
        }
        const statements: string[] = [];
        const db = storage.db.withPlugin({
          transformQuery(args) {
            statements.push(storage.db.getExecutor().compileQuery(args.node, args.queryId).sql);
            return args.node;
          },
          async transformResult(args) {
            return args.result;
          },
        });
        const page = await listJobs(db, { tenantId: "a", filters: {}, limit: 2 });
        assert.equal(page.rows.length, 2);
        assert.equal(page.total, 3);
        assert.deepEqual(page.summary, { queued: 3 });
        assert.equal(statements.length, 2, statements.join("\n"));
        for (const statement of statements) assert.doesNotMatch(statement, /count\(|group by/i, statement);
        assert.ok(statements.some((s) => /from "job_status_counts"/.test(s)));
      } finally {
        await storage.close();
      }
    });

    it("a filtered page reads the jobs matching a filter, in the page's order, never the whole tenant", async () => {
      const storage = await dialect.openFresh();
      try {
        await createTenant(storage, { id: "a", displayName: "a" }, new Date(T0));
        // 400 jobs; each filter below matches a few of them, and one matches none.
        const rows = Array.from({ length: 400 }, (_, i) => {
          const id = `job-${String(i).padStart(4, "0")}`;
          return {
            ...queuedJob({
              id,
              tenant: "a",
              submissionKey: id,
              requestHash: id,
              queuedAt: new Date(T0 + i * 1000).toISOString(),
            }),
            status: i % 100 === 7 ? "running" : "passed",
            repository: i % 100 === 5 ? "acme/rare" : "acme/widget",
            branch: i % 100 === 3 ? "feature" : "main",
            class: i % 100 === 9 ? "build:nightly:kiln8-cpu" : "test:stable:kiln2-cpu",
          };
        });
        await storage.db.insertInto("jobs").values(rows.map(jobRowOf)).execute();
        const cases: JobFilters[] = [
          {},
          { status: "running" },
          { status: "queued" },
          { repository: "acme/rare" },
          { branch: "feature" },
          { class: "build:nightly:kiln8-cpu" },
          { repository: "acme/widget", branch: "feature" },
          { repository: "acme/rare", status: "passed", class: "test:stable:kiln2-cpu" },
        ];
        for (const filters of cases) {
          const compiled: CompiledQuery[] = [];
          const db = storage.db.withPlugin({
            transformQuery(args) {
              compiled.push(storage.db.getExecutor().compileQuery(args.node, args.queryId));
              return args.node;
            },
            async transformResult(args) {
              return args.result;
            },
          });
          const page = await listJobs(db, { tenantId: "a", filters, limit: 2 });
          const keyset = compiled.find((q) => /from "jobs"/.test(q.sql));
          assert.ok(keyset, JSON.stringify(compiled));
          // The most jobs any one of the page's filters matches: what the read may walk.
          const matching = Math.max(
            ...Object.entries(filters).map(
              ([column, value]) => rows.filter((r) => r[column as keyof typeof r] === value).length,
            ),
            page.rows.length + 1,
          );
          if (storage.dialect === "sqlite") {
            // SQLite has no statistics here: its plan is its rule, stated.
            const plan = await storage.db.executeQuery<{ detail: string }>(
              CompiledQuery.raw(`explain query plan ${keyset.sql}`, [...keyset.parameters]),
            );
            const details = plan.rows.map((r) => r.detail).join("; ");
            const index = Object.keys(filters).length === 0 ? /jobs_by_tenant/ : /jobs_listed_by_/;
            assert.match(
              details,
              new RegExp(`SEARCH jobs USING INDEX ${index.source}`),
              `${JSON.stringify(filters)}: ${details}`,
            );
            assert.doesNotMatch(details, /TEMP B-TREE|SCAN jobs/, `${JSON.stringify(filters)}: ${details}`);
          } else {
            // PostgreSQL picks by statistics (a table this small it would rather scan whole): with
            // scans and sorts priced out, the plan shows whether an index reads the page in order.
            const plan = await storage.transaction(async (trx) => {
              await sql`set local enable_seqscan = off`.execute(trx);
              await sql`set local enable_bitmapscan = off`.execute(trx);
              await sql`set local enable_sort = off`.execute(trx);
              return trx.executeQuery<{ "QUERY PLAN": unknown }>(
                CompiledQuery.raw(`explain (analyze, format json) ${keyset.sql}`, [...keyset.parameters]),
              );
            });
            const nodes: Record<string, unknown>[] = [];
            const walk = (node: Record<string, unknown>) => {
              nodes.push(node);
              for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
            };
            const [root] = (plan.rows[0]?.["QUERY PLAN"] ?? []) as { Plan: Record<string, unknown> }[];
            assert.ok(root);
            walk(root.Plan);
            const text = JSON.stringify(root.Plan);
            assert.ok(!nodes.some((n) => n["Node Type"] === "Sort"), `${JSON.stringify(filters)}: sorted: ${text}`);
            const scans = nodes.filter((n) => n["Relation Name"] === "jobs");
            assert.equal(scans.length, 1, text);
            const read = scans.reduce(
              (sum, n) => sum + Number(n["Actual Rows"] ?? 0) + Number(n["Rows Removed by Filter"] ?? 0),
              0,
            );
            assert.ok(read <= matching, `${JSON.stringify(filters)}: read ${read} rows for ${matching}: ${text}`);
          }
        }
      } finally {
        await storage.close();
      }
    });

    it("moves of one tenant's jobs do not wait for each other's counters", {
      skip: dialect.name === "sqlite" ? "one writer at a time: every move waits" : false,
    }, async () => {
      await withTwoStorages(dialect, async (main, other) => {
        await createTenant(main, { id: "a", displayName: "a" }, new Date(T0));
        const ids = ["j1", "j2", "j3"];
        for (const id of ids) {
          await insertJob(
            main,
            queuedJob({ id, tenant: "a", submissionKey: id, requestHash: id, queuedAt: new Date(T0).toISOString() }),
          );
        }
        const move = (storage: Storage, jobId: string, from: string, to: string) =>
          storage.transaction(async (trx) => {
            await trx.updateTable("jobs").set({ status: to }).where("id", "=", jobId).execute();
            await recordTransition(trx, {
              jobId,
              tenantId: "a",
              repository: "acme/widget",
              from,
              to,
              at: new Date(T0),
              reason: "test",
            });
          });
        // One move is made and held open, uncommitted, its counters' change queued; others of the
        // same tenant, between the same statuses and back, commit meanwhile without waiting.
        const slow = held(main);
        const slowCommit = move(slow.storage, "j1", "queued", "running");
        // Whatever a verdict below says, the held move is let go, so a move found waiting for it
        // fails the test instead of holding it forever.
        const racing: Promise<unknown>[] = [slowCommit];
        const race = <T>(pending: Promise<T>): Promise<T> => {
          racing.push(pending);
          return pending;
        };
        try {
          await slow.ready;
          const fast = race(move(other, "j2", "queued", "running"));
          assert.equal(await blockedOrSettled(other, fast), "settled", "the second move did not wait for the first");
          await fast;
          const back = race(move(other, "j2", "running", "queued"));
          assert.equal(await blockedOrSettled(other, back), "settled", "the move back did not wait either");
          await back;
          const inserted = race(
            insertJob(
              other,
              queuedJob({
                id: "j4",
                tenant: "a",
                submissionKey: "j4",
                requestHash: "j4",
                queuedAt: new Date(T0).toISOString(),
              }),
            ),
          );
          assert.equal(await blockedOrSettled(other, inserted), "settled", "a submission did not wait either");
          await inserted;
          // The held move is not counted until it commits.
          assert.deepEqual((await keptByCounters(other)).a, { queued: 4 });
        } finally {
          slow.release();
          await Promise.allSettled(racing);
        }
        await slowCommit;
        assert.deepEqual((await keptByCounters(other)).a, { queued: 3, running: 1 });
        assert.deepEqual(await keptByCounters(other), await countedByJobs(other));
      });
    });

    it("migrating counts the jobs there are, and counts on from there", async () => {
      const database = await dialect.createDatabase();
      const storage = await database.open();
      try {
        await migrateToBefore(storage, MIGRATION);
        for (const id of ["a", "b"]) await createTenant(storage, { id, displayName: id }, new Date(T0));
        const statuses = ["passed", "passed", "failed", "queued", "running", "passed", "cancelled"];
        for (const [i, status] of statuses.entries()) {
          const id = `old-${i}`;
          const tenant = i % 3 === 0 ? "b" : "a";
          await insertJobRowBefore0042(storage.db, {
            ...queuedJob({ id, tenant, submissionKey: id, requestHash: id, queuedAt: new Date(T0 + i).toISOString() }),
            status,
          });
        }
        assert.ok((await migrateToLatest(storage)).applied.includes(MIGRATION));
        const real = await countedByJobs(storage);
        assert.deepEqual(real, { a: { passed: 2, failed: 1, running: 1 }, b: { passed: 1, queued: 1, cancelled: 1 } });
        assert.deepEqual(await keptByCounters(storage), real);
        await insertJob(
          storage,
          queuedJob({
            id: "new",
            tenant: "b",
            submissionKey: "new",
            requestHash: "new",
            queuedAt: new Date(T0 + 99).toISOString(),
          }),
        );
        assert.deepEqual((await keptByCounters(storage)).b, { passed: 1, queued: 2, cancelled: 1 });
      } finally {
        await storage.close();
        await database.dispose();
      }
    });
  });
}
