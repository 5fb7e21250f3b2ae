import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type AttemptRow,
  claimNextJob,
  createTenant,
  finishAttempt,
  insertJob,
  type JobRow,
  readTenantConsumption,
  readTenantControls,
  readTenantSettings,
  registerHost,
  type Storage,
  TENANT_WAIT_PREFIX,
  writeTenantControls,
  writeTenantSettings,
} from "../src/index.js";
import { attemptCompletion, queuedJob } from "../src/testing/index.js";
import { DIALECTS, type TestDatabase } from "./dialects.js";

/**
 * Tenant policy storage: settings and controls as compare-and-set rows, and the scheduler's
 * enforcement of concurrency and suspension in claimNextJob — with several Storages over one
 * database (separate connections on SQLite, separate pools on PostgreSQL, as two kiln-server
 * processes have), claiming all at once. Every verdict holds under any interleaving; none
 * depends on timing.
 */

const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const clock = { now: () => T0 };
const SIZE = "kiln2-cpu";
const NO_HANG = { timeout: 30 * 60_000 };
let submissions = 0;

for (const dialect of DIALECTS) {
  describe(`tenant policy [${dialect.name}]`, { skip: dialect.skip }, () => {
    async function withTenants(count: number, test: (main: Storage, storages: Storage[]) => Promise<void>) {
      const database: TestDatabase = await dialect.createDatabase();
      const storages: Storage[] = [];
      try {
        for (let i = 0; i < count; i++) storages.push(await database.open({ maxConnections: 2 }));
        const [main] = storages;
        assert.ok(main);
        await createTenant(main, { id: "acme" }, clock.now());
        await createTenant(main, { id: "globex" }, clock.now());
        await registerHost(main, { id: "host-a", vcpus: 64, memoryBytes: 2 ** 37, isolation: "sandbox", now: T0 });
        await test(main, storages);
      } finally {
        await Promise.all(storages.map((s) => s.close()));
        await database.dispose();
      }
    }

    it("settings: version 0 with defaults, then compare-and-set; a moved-past version is stale", async () => {
      await withTenants(1, async (storage) => {
        const before = await readTenantSettings(storage, { tenantId: "acme" });
        assert.equal(before?.version, 0);
        assert.equal(before?.allowedSizes, null);
        assert.equal(before?.changedBy, null);
        assert.equal(await readTenantSettings(storage, { tenantId: "nobody" }), undefined);
        const write = (expectedVersion: number, changes: Parameters<typeof writeTenantSettings>[1]["changes"]) =>
          writeTenantSettings(storage, { tenantId: "acme", expectedVersion, changes, changedBy: "u_1", now: at(1) });
        assert.deepEqual(await write(0, { allowedSizes: [SIZE, "kiln4-cpu"], agentsMaySubmit: false }), {
          kind: "written",
          version: 1,
          changedAt: at(1).toISOString(),
        });
        assert.deepEqual(await write(0, { defaultSize: SIZE }), { kind: "stale", currentVersion: 1 });
        assert.equal((await write(1, { defaultSize: "kiln4-cpu" })).kind, "written");
        const after = await readTenantSettings(storage, { tenantId: "acme" });
        assert.equal(after?.version, 2);
        assert.deepEqual(after?.allowedSizes, [SIZE, "kiln4-cpu"], "unnamed settings keep their value");
        assert.equal(after?.defaultSize, "kiln4-cpu");
        assert.equal(after?.agentsMaySubmit, false);
        assert.equal(after?.changedBy, "u_1");
      });
    });

    it("controls: compare-and-set; a suspension keeps its start across later changes; lifting clears it", async () => {
      await withTenants(1, async (storage) => {
        assert.equal((await readTenantControls(storage, { tenantId: "acme" }))?.version, 0);
        const set = (expectedVersion: number, changes: Parameters<typeof writeTenantControls>[1]["changes"], s = 1) =>
          writeTenantControls(storage, { tenantId: "acme", expectedVersion, changes, changedBy: "op", now: at(s) });
        assert.equal((await set(0, { suspension: { suspended: true, reason: "unpaid" } }, 1)).kind, "written");
        assert.deepEqual(await set(0, { maxRunningJobs: 1 }), { kind: "stale", currentVersion: 1 });
        await set(1, { maxRunningJobs: 1, rateCard: { cents_per_vcpu_second: 0.01, cents_per_gib_month: 2 } }, 5);
        let controls = await readTenantControls(storage, { tenantId: "acme" });
        assert.equal(controls?.suspended, true);
        assert.equal(controls?.suspendedSince, at(1).toISOString());
        assert.equal(controls?.suspensionReason, "unpaid");
        assert.equal(controls?.maxRunningJobs, 1);
        assert.deepEqual(controls?.rateCard, { cents_per_vcpu_second: 0.01, cents_per_gib_month: 2 });
        await set(2, { suspension: { suspended: false, reason: null }, rateCard: null }, 9);
        controls = await readTenantControls(storage, { tenantId: "acme" });
        assert.equal(controls?.suspended, false);
        assert.equal(controls?.suspendedSince, null);
        assert.equal(controls?.rateCard, null);
        assert.equal(controls?.version, 3);
      });
    });

    it(
      "concurrency 1, three jobs, four claimers at once: one runs, two wait annotated, then they run in order",
      NO_HANG,
      async () => {
        await withTenants(4, async (main, storages) => {
          await writeTenantControls(main, {
            tenantId: "acme",
            expectedVersion: 0,
            changes: { maxRunningJobs: 1 },
            changedBy: "op",
            now: T0,
          });
          const ids = [
            await enqueue(main, "acme", -30),
            await enqueue(main, "acme", -20),
            await enqueue(main, "acme", -10),
          ];

          const claimed = (await Promise.all(storages.map((s) => claim(s, at(0))))).filter((c) => c !== undefined);
          assert.deepEqual(
            claimed.map((c) => c.job.id),
            [ids[0]],
            "exactly one of the tenant's jobs was placed, the oldest, though four claimers asked at once",
          );
          assert.equal((await readTenantConsumption(main, { tenantId: "acme", now: at(0) })).runningJobs, 1);
          for (const id of ids.slice(1)) {
            const job = await row(main, id);
            assert.equal(job.status, "queued");
            assert.match(
              job.queue_annotation ?? "",
              /^waiting: tenant acme is at its concurrency limit \(1 running of 1\)/,
            );
          }
          assert.equal(await claim(main, at(1)), undefined, "nothing else is placeable");

          // Another tenant is not held by acme's limit.
          const other = await enqueue(main, "globex", -5);
          assert.equal((await claim(main, at(2)))?.job.id, other);

          const order: string[] = [ids[0] ?? ""];
          let running = claimed[0];
          for (let step = 0; step < 2; step++) {
            assert.ok(running);
            await finish(main, running, at(10 + step * 10));
            const next = (await Promise.all(storages.map((s) => claim(s, at(11 + step * 10))))).filter(
              (c) => c !== undefined,
            );
            assert.equal(next.length, 1, "one slot freed, one job placed");
            running = next[0];
            order.push(running?.job.id ?? "");
            assert.equal((await row(main, running?.job.id ?? "")).queue_annotation, null);
          }
          assert.deepEqual(order, ids, "they ran in queue order");
        });
      },
    );

    it("suspension: a suspended tenant's queued jobs stay queued, annotated; lifting it places them", async () => {
      await withTenants(1, async (storage) => {
        const id = await enqueue(storage, "acme", -10);
        await writeTenantControls(storage, {
          tenantId: "acme",
          expectedVersion: 0,
          changes: { suspension: { suspended: true, reason: "abuse report" } },
          changedBy: "op",
          now: T0,
        });
        assert.equal(await claim(storage, at(0)), undefined);
        assert.equal((await row(storage, id)).status, "queued");
        await writeTenantControls(storage, {
          tenantId: "acme",
          expectedVersion: 1,
          changes: { suspension: { suspended: false, reason: null } },
          changedBy: "op",
          now: at(1),
        });
        assert.equal((await claim(storage, at(2)))?.job.id, id);
      });
    });

    it("an annotation another verb wrote (a lost attempt's retry) is not replaced", async () => {
      await withTenants(1, async (storage) => {
        await writeTenantControls(storage, {
          tenantId: "acme",
          expectedVersion: 0,
          changes: { maxRunningJobs: 1 },
          changedBy: "op",
          now: T0,
        });
        await enqueue(storage, "acme", -20);
        const retried = await enqueue(storage, "acme", -10);
        await storage.db
          .updateTable("jobs")
          .set({ queue_annotation: "attempt 1 lost with host host-a; retrying" })
          .where("id", "=", retried)
          .execute();
        assert.ok(await claim(storage, at(0)));
        const job = await row(storage, retried);
        assert.equal(job.queue_annotation, "attempt 1 lost with host host-a; retrying");
        assert.ok(!job.queue_annotation?.startsWith(TENANT_WAIT_PREFIX));
      });
    });
  });
}

async function enqueue(storage: Storage, tenant: string, queuedAtSeconds: number): Promise<string> {
  submissions += 1;
  const queuedAt = at(queuedAtSeconds).toISOString();
  const { job } = await insertJob(
    storage,
    queuedJob(
      {
        id: `job_${String(submissions).padStart(4, "0")}`,
        tenant,
        submissionKey: `policy-${submissions}`,
        requestHash: `hash-${submissions}`,
        queuedAt,
      },
      { repository: `${tenant}/widget`, description: "cargo test" },
    ),
  );
  return job.id;
}

function claim(storage: Storage, now: Date): Promise<{ job: JobRow; attempt: AttemptRow } | undefined> {
  return claimNextJob(storage, { hostId: "host-a", freeVcpus: 64, vcpusOfSize: { [SIZE]: 2 }, leaseSeconds: 60, now });
}

async function finish(storage: Storage, placed: { job: JobRow; attempt: AttemptRow }, now: Date) {
  const done = await finishAttempt(storage, {
    jobId: placed.job.id,
    attempt: placed.attempt.number,
    leaseToken: placed.attempt.lease_token,
    now,
    result: attemptCompletion(),
    meter: (attempt) => {
      const seconds = (now.getTime() - Date.parse(attempt.startedAt)) / 1000;
      return { size: attempt.size, seconds, vcpuSeconds: seconds * attempt.vcpus };
    },
  });
  assert.equal(done, "finished");
}

function row(storage: Storage, id: string) {
  return storage.db.selectFrom("jobs").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
}
