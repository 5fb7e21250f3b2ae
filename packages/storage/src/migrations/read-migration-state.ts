import { sql } from "kysely";
import type { Storage } from "../dialect.js";
import { migrationsFor } from "./migrations.js";

/** The newest migration this build carries and the newest the database has applied. */
export interface MigrationState {
  readonly expected: string;
  /** null when the database has applied none (or has no migration table). */
  readonly applied: string | null;
}

/**
 * Whether the schema is at the latest migration this build knows, for management readiness:
 * one indexed read of Kysely's migration table (its primary key is the name, and names sort in
 * the order they apply). A database that cannot answer throws, which the caller reports.
 */
export async function readMigrationState(storage: Storage): Promise<MigrationState> {
  const names = Object.keys(migrationsFor(storage.dialect)).sort();
  const expected = names.at(-1) ?? "";
  const row = await sql<{ name: string }>`select name from kysely_migration order by name desc limit 1`.execute(
    storage.db,
  );
  return { expected, applied: row.rows[0]?.name ?? null };
}
