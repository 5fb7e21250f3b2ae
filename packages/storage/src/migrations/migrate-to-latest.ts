import { Migrator } from "kysely";
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
  const migrator = new Migrator({ db: storage.db, provider: migrationProviderFor(storage.dialect) });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((result) => result.status === "Error");
    const where = failed ? ` in migration ${failed.migrationName}` : "";
    throw new Error(`database migration failed${where}: ${describe(error)}`, { cause: error });
  }
  return { applied: results.filter((result) => result.status === "Success").map((result) => result.migrationName) };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
