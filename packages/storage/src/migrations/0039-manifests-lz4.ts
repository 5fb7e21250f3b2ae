import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";

/** The columns holding source manifests: megabytes of JSON for a workspace of tens of thousands of files. */
const MANIFEST_COLUMNS = [
  ["source_uploads", "manifest"],
  ["jobs", "source_manifest"],
] as const;

/**
 * Sets a PostgreSQL column's TOAST compression where the server was built with the method (lz4
 * needs `--with-lz4`); nothing on SQLite, or where the method is not built in.
 */
export async function setColumnCompression(
  db: Kysely<unknown>,
  dialect: DialectName,
  columns: readonly (readonly [table: string, column: string])[],
  method: "lz4" | "pglz",
): Promise<void> {
  if (dialect !== "postgres") return;
  const methods = await sql<{ enumvals: string[] | null }>`
    select enumvals from pg_settings where name = 'default_toast_compression'
  `.execute(db);
  if (!(methods.rows[0]?.enumvals ?? []).includes(method)) return;
  for (const [table, column] of columns) {
    await sql`alter table ${sql.table(table)} alter column ${sql.ref(column)} set compression ${sql.raw(method)}`.execute(
      db,
    );
  }
}

/**
 * PostgreSQL compresses a large value when it stores it out of line (TOAST), with pglz unless a
 * column says otherwise. For a 7.8 MB upload manifest pglz took about 110 ms of the backend's CPU
 * per insert, lz4 about 40 ms for a value 9 % larger (measured in docs/benchmarks.md), and
 * that CPU is the one the server's event loop needs on a machine of few cores (reliability
 * trial T15: another tenant reserving such manifests back to back). The manifest columns
 * compress with lz4 where the server was built with it (`--with-lz4`, Debian's and the official
 * images'); values already stored keep their method until rewritten. SQLite stores text as it is.
 */
export function manifestsLz4(dialect: DialectName): Migration {
  return {
    up: (db) => setColumnCompression(db, dialect, MANIFEST_COLUMNS, "lz4"),
    down: (db) => setColumnCompression(db, dialect, MANIFEST_COLUMNS, "pglz"),
  };
}
