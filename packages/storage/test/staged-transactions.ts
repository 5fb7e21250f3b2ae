import { setImmediate as nextTurn } from "node:timers/promises";
import { sql } from "kysely";
import { createTenant, registerHost, type Storage } from "../src/index.js";
import type { DialectUnderTest } from "./dialects.js";

/**
 * Races staged without timing: one transaction is held open at a known point, and a verdict
 * says whether a second statement waits for it. Shared by the tests that order racing writers.
 */

/**
 * Runs `test` on two storages over one fresh database of `dialect` — one to hold a transaction
 * open, the other to race it (each has its own connections, so the race is real) — and closes
 * both and the database afterwards, whatever the test did.
 */
export async function withTwoStorages(
  dialect: DialectUnderTest,
  test: (main: Storage, other: Storage) => Promise<void>,
): Promise<void> {
  const database = await dialect.createDatabase();
  const main = await database.open({ maxConnections: 2 });
  const other = await database.open({ maxConnections: 2 });
  try {
    await test(main, other);
  } finally {
    await Promise.all([main.close(), other.close()]);
    await database.dispose();
  }
}

/**
 * withTwoStorages over a database holding tenant `tenant` and the sandbox hosts `hosts` (64
 * vCPUs each), all made at `now`: where the host tests' races start.
 */
export function withTenantAndHosts(
  dialect: DialectUnderTest,
  world: { tenant: string; hosts: readonly string[]; now: Date },
  test: (main: Storage, other: Storage) => Promise<void>,
): Promise<void> {
  return withTwoStorages(dialect, async (main, other) => {
    await createTenant(main, { id: world.tenant }, world.now);
    for (const id of world.hosts) {
      await registerHost(main, { id, vcpus: 64, memoryBytes: 2 ** 37, isolation: "sandbox", now: world.now });
    }
    await test(main, other);
  });
}

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * `storage` whose transactions, once their work is done, wait for `release()` before
 * committing: `ready` resolves when the work is done (its writes and row locks in place,
 * uncommitted). Statements outside a transaction pass straight through.
 */
export function held(storage: Storage): { storage: Storage; ready: Promise<void>; release: () => void } {
  const reached = deferred();
  const gate = deferred();
  return {
    storage: {
      ...storage,
      transaction: (fn, options) =>
        storage.transaction(async (trx) => {
          const result = await fn(trx);
          reached.resolve();
          await gate.promise;
          return result;
        }, options),
    },
    ready: reached.promise,
    release: gate.resolve,
  };
}

/**
 * Whether `pending` (started while another transaction is held open) finished without waiting
 * for it ("settled") or is waiting for it ("pending"). On PostgreSQL the verdict is the server's:
 * a backend of this database waiting on a lock another backend of this database holds, or the
 * promise settling, whichever is seen first. The holder must be of this database: a commit that
 * notifies (every job move does, notifyAtCommit) takes the cluster's one notification-queue lock,
 * so while another test's database commits, a move here can wait a moment for a lock that is no
 * transaction of this test's (a gate saw it as "pending" under load). On SQLite a writer waits at BEGIN IMMEDIATE, which no catalog shows; the promise is
 * given many turns of the event loop (its BUSY retries run in them) and is "pending" if it has
 * not settled by then — a wait that ended early would show as "settled", so the answer can only
 * err towards "settled".
 */
export async function blockedOrSettled(probe: Storage, pending: Promise<unknown>): Promise<"settled" | "pending"> {
  let settled = false;
  const mark = () => {
    settled = true;
  };
  pending.then(mark, mark);
  if (probe.capabilities.rowLocks) {
    for (;;) {
      await nextTurn();
      if (settled) return "settled";
      const waiting = await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity waiter
        where waiter.datname = current_database() and waiter.wait_event_type = 'Lock'
          and exists (
            select 1 from pg_stat_activity blocker
            where blocker.pid = any(pg_blocking_pids(waiter.pid)) and blocker.datname = current_database()
          )`.execute(probe.db);
      if ((waiting.rows[0]?.n ?? 0) > 0) return settled ? "settled" : "pending";
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
  for (let i = 0; i < 50; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1));
    if (settled) return "settled";
  }
  return "pending";
}
