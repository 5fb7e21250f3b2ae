import { type MigrationProvider, Migrator, sql } from "kysely";
import type { Storage } from "../dialect.js";
import { migrationProviderFor } from "./migrations.js";

export interface AppliedMigrations {
  /** Names applied by this call, in order; empty when the schema was already current. */
  readonly applied: readonly string[];
}

/**
 * Brings the schema up to date. Safe when several processes open the same database at once:
 * on PostgreSQL, Kysely's Migrator holds a session advisory lock while it migrates; on SQLite,
 * each run is one `BEGIN IMMEDIATE` transaction (see sqlite/sqlite-dialect.ts), so the second
 * process waits for the write lock and then finds nothing left to do. In both cases the applied
 * list is read after the lock is taken, and a failed migration rolls back entirely.
 */
export async function migrateToLatest(storage: Storage): Promise<AppliedMigrations> {
  const provider = migrationProviderFor(storage.dialect);
  if (await alreadyCurrent(storage, provider)) return { applied: [] };
  const migrator = new Migrator({ db: storage.db, provider });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((result) => result.status === "Error");
    const where = failed ? ` in migration ${failed.migrationName}` : "";
    throw new Error(`database migration failed${where}: ${describe(error)}`, { cause: error });
  }
  return { applied: results.filter((result) => result.status === "Success").map((result) => result.migrationName) };
}

/**
 * Whether the database has applied exactly this code's migrations, in the order the Migrator reads
 * them (by timestamp, then name): the Migrator would then find nothing to do and no reason to
 * refuse, so its work — its tables looked up in the catalogue, a lock taken around a transaction,
 * the list read again — is skipped, at every start of a server and every Storage opened on a
 * current database. Anything else (no migration table yet, a migration missing, one this code does
 * not know, a read that failed) goes to the Migrator, which migrates, refuses or fails as it
 * always did. A migrator elsewhere records its migrations in the transaction that applies them,
 * so a list read complete is a schema complete.
 */
async function alreadyCurrent(storage: Storage, provider: MigrationProvider): Promise<boolean> {
  const known = Object.keys(await provider.getMigrations()).sort();
  let recorded: { name: string; timestamp: string }[];
  try {
    recorded = (
      await sql<{ name: string; timestamp: string }>`select name, timestamp from kysely_migration`.execute(storage.db)
    ).rows;
  } catch {
    return false;
  }
  const applied = recorded
    .sort((a, b) =>
      a.timestamp === b.timestamp
        ? a.name.localeCompare(b.name)
        : new Date(a.timestamp).getTime() - new Date(b.timestamp).getTime(),
    )
    .map((row) => row.name);
  return applied.length === known.length && applied.every((name, i) => name === known[i]);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
