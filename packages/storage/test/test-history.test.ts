import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type AttemptCompletion,
  claimNextJob,
  createTenant,
  finishAttempt,
  insertJob,
  listTestHistory,
  registerHost,
  type Storage,
  type TestHistorySort,
} from "../src/index.js";
import { attemptCompletion, queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";

/**
 * The repository's test history (migration 0046): written by finishAttempt from the attempt's
 * report as the job settles, read by listTestHistory over the newest `window` test jobs, grouped
 * per test, ordered and kept by sort, keyset-paged, and only ever of the asking tenant.
 */

const T0 = Date.parse("2026-11-29T08:00:00.000Z");
const at = (minutes: number) => new Date(T0 + minutes * 60_000);

interface ReportedTest {
  readonly name: string;
  readonly outcome: "passed" | "failed" | "ignored";
  readonly duration_ms: number;
  readonly flaky?: boolean;
}

let submissions = 0;

/** Inserts, claims and finishes one `cargo test` job whose attempt reported `tests` (target `widget (lib)`). */
async function runTestJob(
  storage: Storage,
  input: { tenant: string; minute: number; tests: readonly ReportedTest[]; outcome?: AttemptCompletion["outcome"] },
): Promise<string> {
  submissions += 1;
  const id = `job_h${String(submissions).padStart(3, "0")}`;
  const queuedAt = at(input.minute).toISOString();
  await insertJob(
    storage,
    queuedJob({ id, tenant: input.tenant, submissionKey: `k${submissions}`, requestHash: `h${submissions}`, queuedAt }),
  );
  const placed = await claimNextJob(storage, {
    hostId: "host-a",
    freeVcpus: 64,
    vcpusOfSize: { "kiln2-cpu": 2 },
    leaseSeconds: 60,
    now: at(input.minute),
  });
  assert.equal(placed?.job.id, id);
  const outcome = input.outcome ?? (input.tests.some((t) => t.outcome === "failed") ? "failed" : "passed");
  const report = {
    phases: [],
    crates: [],
    tests: input.tests.map((t) => ({ target: "widget (lib)", attempt: 1, ...t })),
    unit: null,
  };
  const finished = await finishAttempt(storage, {
    jobId: id,
    attempt: placed.attempt.number,
    leaseToken: placed.attempt.lease_token,
    now: at(input.minute + 1),
    result: attemptCompletion(outcome, { report: JSON.stringify(report) }),
    meter: () => ({ size: "kiln2-cpu", seconds: 60, vcpuSeconds: 120 }),
  });
  assert.equal(finished, "finished");
  return id;
}

/** Five jobs of acme/widget: `flaky` is flaky in jobs 2 and 4, `slow` grows slower, `broken` fails last. */
async function fiveJobs(storage: Storage): Promise<string[]> {
  const slow = [100, 110, 120, 200, 220];
  const jobs: string[] = [];
  for (let n = 0; n < 5; n++) {
    jobs.push(
      await runTestJob(storage, {
        tenant: "acme",
        minute: n * 10,
        tests: [
          { name: "flaky", outcome: "passed", duration_ms: 5, ...(n === 1 || n === 3 ? { flaky: true } : {}) },
          { name: "slow", outcome: "passed", duration_ms: slow[n] ?? 0 },
          { name: "broken", outcome: n === 4 ? "failed" : "passed", duration_ms: 1 },
          { name: "skipped", outcome: "ignored", duration_ms: 0 },
        ],
      }),
    );
  }
  return jobs;
}

const read = (
  storage: Storage,
  sort: TestHistorySort,
  extra: { window?: number; limit?: number; cursor?: string | null } = {},
) =>
  listTestHistory(storage.db, {
    tenantId: "acme",
    repository: "acme/widget",
    window: extra.window ?? 20,
    sort,
    limit: extra.limit ?? 50,
    cursor: extra.cursor ?? null,
  });

for (const dialect of DIALECTS) {
  describe(`test history [${dialect.name}]`, { skip: dialect.skip }, () => {
    async function withStorage(test: (storage: Storage) => Promise<void>): Promise<void> {
      const storage = await dialect.openFresh();
      try {
        await createTenant(storage, { id: "acme" }, at(0));
        await createTenant(storage, { id: "globex" }, at(0));
        await registerHost(storage, {
          id: "host-a",
          vcpus: 64,
          memoryBytes: 2 ** 37,
          isolation: "sandbox",
          now: at(0),
        });
        await test(storage);
      } finally {
        await storage.close();
      }
    }

    it("groups five jobs' outcomes per test, with each test's runs newest first", async () => {
      await withStorage(async (storage) => {
        const jobs = await fiveJobs(storage);
        const page = await read(storage, "name");
        assert.deepEqual(
          page.window.map((w) => w.jobId),
          [...jobs].reverse(),
        );
        assert.deepEqual(
          page.tests.map((t) => t.name),
          ["broken", "flaky", "skipped", "slow"],
        );
        const flaky = page.tests.find((t) => t.name === "flaky");
        assert.ok(flaky);
        assert.deepEqual([flaky.runs, flaky.passed, flaky.flaky, flaky.failed], [5, 3, 2, 0]);
        assert.deepEqual(
          flaky.recent.map((r) => [r.jobId, r.outcome]),
          [
            [jobs[4], "passed"],
            [jobs[3], "flaky"],
            [jobs[2], "passed"],
            [jobs[1], "flaky"],
            [jobs[0], "passed"],
          ],
        );
        const slow = page.tests.find((t) => t.name === "slow");
        assert.deepEqual(
          slow?.recent.map((r) => r.durationMs),
          [220, 200, 120, 110, 100],
        );
        assert.equal(page.tests.find((t) => t.name === "skipped")?.ignored, 5);
        assert.equal(page.nextCursor, null);
      });
    });

    it("orders slowest by mean duration, keeps only flaky tests under flakiest and the newly failing under newly_failing", async () => {
      await withStorage(async (storage) => {
        await fiveJobs(storage);
        assert.deepEqual(
          (await read(storage, "slowest")).tests.map((t) => t.name),
          ["slow", "flaky", "broken", "skipped"],
        );
        assert.deepEqual(
          (await read(storage, "flakiest")).tests.map((t) => [t.name, t.flaky]),
          [["flaky", 2]],
        );
        assert.deepEqual(
          (await read(storage, "newly_failing")).tests.map((t) => t.name),
          ["broken"],
        );
        // Over the newest two jobs only, `flaky` was flaky once and `broken` still newly fails.
        const two = await read(storage, "flakiest", { window: 2 });
        assert.deepEqual(
          two.tests.map((t) => [t.name, t.runs, t.flaky]),
          [["flaky", 2, 1]],
        );
        // Over the newest job alone, `broken` never passed in the window: not newly failing.
        assert.deepEqual((await read(storage, "newly_failing", { window: 1 })).tests, []);
      });
    });

    it("pages with the spec's cursor: every test exactly once, in order", async () => {
      await withStorage(async (storage) => {
        await fiveJobs(storage);
        for (const sort of ["name", "slowest"] as const) {
          const seen: string[] = [];
          let cursor: string | null = null;
          let pages = 0;
          do {
            const page = await read(storage, sort, { limit: 1, cursor });
            seen.push(...page.tests.map((t) => t.name));
            cursor = page.nextCursor;
            pages += 1;
          } while (cursor !== null);
          assert.equal(pages, 4, sort);
          assert.deepEqual(
            seen,
            (await read(storage, sort)).tests.map((t) => t.name),
            sort,
          );
        }
      });
    });

    it("reads only the asking tenant's jobs; a cancelled job and a job without tests enter no window", async () => {
      await withStorage(async (storage) => {
        await fiveJobs(storage);
        await runTestJob(storage, {
          tenant: "globex",
          minute: 60,
          tests: [{ name: "theirs", outcome: "failed", duration_ms: 9 }],
        });
        await runTestJob(storage, {
          tenant: "acme",
          minute: 70,
          tests: [{ name: "cancelled", outcome: "passed", duration_ms: 1 }],
          outcome: "cancelled",
        });
        await runTestJob(storage, { tenant: "acme", minute: 80, tests: [] });
        const page = await read(storage, "name");
        assert.equal(page.window.length, 5);
        assert.deepEqual(
          page.tests.map((t) => t.name),
          ["broken", "flaky", "skipped", "slow"],
        );
        const theirs = await listTestHistory(storage.db, {
          tenantId: "globex",
          repository: "acme/widget",
          window: 20,
          sort: "name",
          limit: 50,
          cursor: null,
        });
        assert.deepEqual(
          theirs.tests.map((t) => t.name),
          ["theirs"],
        );
      });
    });

    it("keeps a test named twice in one job's report once", async () => {
      await withStorage(async (storage) => {
        await runTestJob(storage, {
          tenant: "acme",
          minute: 0,
          tests: [
            { name: "twice", outcome: "passed", duration_ms: 3 },
            { name: "twice", outcome: "passed", duration_ms: 4 },
          ],
        });
        const page = await read(storage, "name");
        assert.deepEqual(
          page.tests.map((t) => [t.name, t.runs]),
          [["twice", 1]],
        );
      });
    });
  });
}
