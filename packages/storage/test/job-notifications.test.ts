import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { sql } from "kysely";
import pg from "pg";
import {
  appendLogRecords,
  createTenant,
  drainHost,
  insertJob,
  JOB_CHANNELS,
  type JobNotificationEvent,
  type JobNotifications,
  LISTEN_RETRY_MS,
  raiseHostImpairment,
  registerHost,
  reopenHostAdmission,
  type Storage,
  startJobNotifications,
  undrainHost,
  writeTenantControls,
} from "../src/index.js";
import { notifyAtCommit } from "../src/notifications/job-notices.js";
import { claimAs, finishPlaced, queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { held, withTwoStorages } from "./staged-transactions.js";

/**
 * The notification port (notifications/) on every dialect, with two Storages over one database:
 * the writer is one, the listener the other — on PostgreSQL separate pools and a LISTEN
 * connection of its own, on SQLite two connections to one file in one process (notices travel on
 * the process's bus). Nothing waits on time: each test waits for the wake it expects, and shows
 * a wake did not happen by having a later notice arrive first.
 */

const T0 = new Date("2026-11-22T07:00:00.000Z");
const TENANT = "acme";
const NO_HANG = { timeout: 30 * 60_000 };

/** Wakes recorded in order, and a way to wait for the next one matching. */
class Wakes {
  readonly seen: string[] = [];
  #waiters: { match: (wake: string) => boolean; resolve: () => void }[] = [];

  record(wake: string): void {
    this.seen.push(wake);
    for (const waiter of this.#waiters.filter((w) => w.match(wake))) waiter.resolve();
    this.#waiters = this.#waiters.filter((w) => !w.match(wake));
  }

  /** Resolves when `wake` is (or has been, since index `from`) recorded. */
  next(wake: string, from = 0): Promise<void> {
    if (this.seen.slice(from).includes(wake)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ match: (w) => w === wake, resolve }));
  }
}

let jobs = 0;
async function enqueue(storage: Storage, id: string): Promise<void> {
  jobs += 1;
  const { created } = await insertJob(
    storage,
    queuedJob({
      id,
      tenant: TENANT,
      submissionKey: `notify-${jobs}`,
      requestHash: `hash-${jobs}`,
      queuedAt: T0.toISOString(),
    }),
  );
  assert.ok(created);
}

async function withPort(
  dialect: (typeof DIALECTS)[number],
  test: (ctx: {
    writer: Storage;
    listener: Storage;
    port: JobNotifications;
    wakes: Wakes;
    events: JobNotificationEvent[];
    clock: ManualClock;
  }) => Promise<void>,
) {
  await withTwoStorages(dialect, async (writer, listener) => {
    await createTenant(writer, { id: TENANT }, T0);
    const clock = new ManualClock(T0);
    const events: JobNotificationEvent[] = [];
    const wakes = new Wakes();
    const port = startJobNotifications(listener, { clock, log: silentLogger, onEvent: (e) => events.push(e) });
    try {
      await test({ writer, listener, port, wakes, events, clock });
    } finally {
      await port.stop();
    }
  });
}

for (const dialect of DIALECTS) {
  describe(`job notifications [${dialect.name}]`, { skip: dialect.skip }, () => {
    it(
      "a submission wakes the queue, the job and the tenant's events; a log append wakes the job",
      NO_HANG,
      async () => {
        await withPort(dialect, async ({ writer, port, wakes }) => {
          port.onQueued(() => wakes.record("queued"));
          port.onJob("job_1", () => wakes.record("job_1"));
          port.onJobEvents(TENANT, () => wakes.record("events"));
          port.onAnyJob((id) => wakes.record(`any:${id}`));
          await port.ready();
          assert.equal(port.listening, true);

          await enqueue(writer, "job_1");
          await Promise.all([wakes.next("queued"), wakes.next("job_1"), wakes.next("events"), wakes.next("any:job_1")]);

          await registerHost(writer, { id: "host-a", vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: T0 });
          const placed = await claimAs(writer, "host-a", T0);
          assert.ok(placed);
          const mark = wakes.seen.length;
          const accepted = await appendLogRecords(writer, {
            jobId: "job_1",
            attempt: 1,
            leaseToken: placed.attempt.lease_token,
            lines: [{ stream: "stdout", at: T0, text: "hello" }],
          });
          assert.equal(accepted, true);
          await wakes.next("job_1", mark);
          assert.equal(
            wakes.seen.slice(mark).includes("queued"),
            false,
            "a log line (and the claim before it: running, not queued) wakes no host",
          );
        });
      },
    );

    it(
      "hosts waiting to claim are woken by what can make a job placeable: a drain and its lifting, admission closed and reopened, a controls change, a limited tenant's freed slot",
      NO_HANG,
      async () => {
        await withPort(dialect, async ({ writer, port, wakes }) => {
          let claimable = 0;
          port.onClaimable(() => {
            claimable += 1;
            wakes.record(`claimable-${claimable}`);
          });
          port.onJob("marker", () => wakes.record("marker"));
          await port.ready();
          /** Runs `change`, then a marker notice: the wakes between show what the change issued. */
          const wakesOf = async (change: () => Promise<unknown>): Promise<number> => {
            const before = claimable;
            const mark = wakes.seen.length;
            await change();
            await writer.transaction((trx) => notifyAtCommit(trx, JOB_CHANNELS.job, "marker"));
            await wakes.next("marker", mark);
            return claimable - before;
          };
          await registerHost(writer, { id: "host-a", vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: T0 });
          const change = { actor: "op", reason: null, now: T0 };
          let revision = -1;
          assert.equal(
            await wakesOf(async () => {
              const drained = await writer.transaction((trx) =>
                drainHost(trx, { hostId: "host-a", action: "operator.hosts.drain", ...change }),
              );
              assert.equal(drained.kind, "changed");
              if (drained.kind === "changed") revision = drained.host.revision;
            }),
            1,
            "a drain",
          );
          assert.equal(
            await wakesOf(() =>
              writer.transaction((trx) =>
                undrainHost(trx, {
                  hostId: "host-a",
                  expectedRevision: revision,
                  action: "operator.hosts.undrain",
                  ...change,
                }),
              ),
            ),
            1,
            "lifting the drain",
          );
          assert.equal(
            await wakesOf(() =>
              writer.transaction((trx) =>
                raiseHostImpairment(
                  trx,
                  { hostId: "host-a", kind: "disk_low", evidence: [{ kind: "disk", detail: "1% free" }], now: T0 },
                  writer.capabilities.rowLocks,
                ),
              ),
            ),
            1,
            "an impairment closing admission",
          );
          assert.equal(await wakesOf(() => reopenHostAdmission(writer, { hostId: "host-a" })), 1, "admission reopened");

          // A tenant without a concurrency limit: a job's end frees no slot anyone waits for.
          const queue = async (id: string) => assert.equal(await wakesOf(() => enqueue(writer, id)), 1, "queued");
          await queue("job_unlimited");
          const settle = async () => {
            const placed = await claimAs(writer, "host-a", T0);
            assert.ok(placed);
            return () => finishPlaced(writer, placed, T0);
          };
          const finishUnlimited = await settle();
          assert.equal(await wakesOf(finishUnlimited), 0, "an unlimited tenant's job ending wakes no host");

          assert.equal(
            await wakesOf(() =>
              writeTenantControls(writer, {
                tenantId: TENANT,
                expectedVersion: 0,
                changes: { maxRunningJobs: 1 },
                changedBy: "op",
                now: T0,
              }),
            ),
            1,
            "a controls change",
          );
          await queue("job_limited");
          const finishLimited = await settle();
          assert.equal(await wakesOf(finishLimited), 0, "nothing of the tenant is queued: its slot frees for no one");
          await queue("job_slot_holder");
          const finishHolder = await settle();
          await queue("job_waiting_for_slot");
          assert.equal(await wakesOf(finishHolder), 1, "a limited tenant's slot freed with a job of its own queued");
        });
      },
    );

    it("a notice goes out when its transaction commits, never before and never for a rollback", NO_HANG, async () => {
      await withPort(dialect, async ({ writer, listener, port, wakes }) => {
        for (const id of ["job_held", "job_marker", "job_rolled_back", "job_after"]) {
          port.onJob(id, () => wakes.record(id));
        }
        await port.ready();
        // A transaction that notified and holds before its commit.
        const holding = held(writer);
        const committing = holding.storage.transaction((trx) => notifyAtCommit(trx, JOB_CHANNELS.job, "job_held"));
        await holding.ready;
        // A notice issued after it, outside any transaction (a read: it waits for no writer),
        // arrives while the first is still uncommitted, and the first has not come before it.
        await notifyAtCommit(listener.db, JOB_CHANNELS.job, "job_marker");
        await wakes.next("job_marker");
        assert.deepEqual(wakes.seen, ["job_marker"]);
        holding.release();
        await committing;
        await wakes.next("job_held");

        await assert.rejects(
          writer.transaction(async (trx) => {
            await notifyAtCommit(trx, JOB_CHANNELS.job, "job_rolled_back");
            throw new Error("roll back");
          }),
          /roll back/,
        );
        await writer.transaction((trx) => notifyAtCommit(trx, JOB_CHANNELS.job, "job_after"));
        await wakes.next("job_after");
        assert.deepEqual(wakes.seen, ["job_marker", "job_held", "job_after"], "the rolled-back notice never came");
      });
    });

    it("an unsubscribed waiter is not woken; the others are", NO_HANG, async () => {
      await withPort(dialect, async ({ writer, port, wakes }) => {
        const stop = port.onJob("job_1", () => wakes.record("first"));
        port.onJob("job_1", () => wakes.record("second"));
        await port.ready();
        stop();
        await writer.transaction((trx) => notifyAtCommit(trx, JOB_CHANNELS.job, "job_1"));
        await wakes.next("second");
        assert.deepEqual(wakes.seen, ["second"]);
      });
    });

    it("a dropped listening connection is reported, every waiter woken, and listening re-made; a failed attempt is reported and retried on the clock", {
      ...NO_HANG,
      skip: dialect.name === "sqlite" ? "notices travel in-process: nothing to lose" : false,
    }, async () => {
      await withPort(dialect, async ({ writer, port, wakes, events, clock }) => {
        port.onJob("job_1", () => wakes.record("job_1"));
        port.onQueued(() => wakes.record("queued"));
        await port.ready();
        const first = await listeningBackend(writer);
        assert.ok(first !== undefined, "the port holds one LISTEN connection");

        // Nobody can connect to the database now, so the immediate reconnection fails too.
        const database = await currentDatabase(writer);
        await administer(`alter database ${database} allow_connections false`);
        try {
          await administer(`select pg_terminate_backend(${first})`);
          await until(() => events.some((e) => e.type === "notifications:listen-failed"));
        } finally {
          await administer(`alter database ${database} allow_connections true`);
        }
        assert.equal(events[0]?.type, "notifications:lost", "the drop is reported first");
        const failed = events.find((e) => e.type === "notifications:listen-failed");
        assert.equal(failed?.type === "notifications:listen-failed" && failed.retryInMs, LISTEN_RETRY_MS);
        assert.equal(port.listening, false);
        assert.ok(wakes.seen.includes("job_1") && wakes.seen.includes("queued"), "every waiter re-read on the loss");

        // The retry is due on the clock: listening again, reported, and every waiter woken once more.
        const mark = wakes.seen.length;
        await clock.advance(LISTEN_RETRY_MS);
        await until(() => events.some((e) => e.type === "notifications:restored"));
        assert.equal(port.listening, true);
        await wakes.next("job_1", mark);
        const second = await listeningBackend(writer);
        assert.ok(second !== undefined && second !== first, "a new LISTEN connection");

        const before = wakes.seen.length;
        await writer.transaction((trx) => notifyAtCommit(trx, JOB_CHANNELS.job, "job_1"));
        await wakes.next("job_1", before);
        assert.deepEqual(
          events.map((e) => e.type),
          ["notifications:lost", "notifications:listen-failed", "notifications:restored"],
        );
      });
    });
  });
}

/** The LISTEN connection's backend on this database (the port names itself `kiln-listen`). */
async function listeningBackend(storage: Storage): Promise<number | undefined> {
  const rows = await sql<{ pid: number }>`
    select pid from pg_stat_activity
    where datname = current_database() and application_name = 'kiln-listen'`.execute(storage.db);
  assert.ok(rows.rows.length <= 1, "at most one LISTEN connection per port");
  return rows.rows[0]?.pid;
}

async function currentDatabase(storage: Storage): Promise<string> {
  const rows = await sql<{ name: string }>`select current_database() as name`.execute(storage.db);
  const name = rows.rows[0]?.name;
  assert.ok(name !== undefined && /^kiln_test_[0-9a-f]+$/.test(name));
  return name;
}

/** A statement on the cluster's maintenance database (the test database may refuse connections). */
async function administer(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.KILN_TEST_POSTGRES_URL });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Waits for a condition the code under test brings about (an event it reports), checking every few ms. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}
