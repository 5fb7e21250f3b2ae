import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import type { Capabilities, Storage } from "../dialect.js";
import type { Database } from "../schema.js";
import { kilnPostgresTypes } from "./postgres-type-parsers.js";

const POSTGRES_CAPABILITIES: Capabilities = Object.freeze({
  skipLocked: true,
  returning: true,
  singleWriter: false,
  rowLocks: true,
  multiProcess: true,
  listenNotify: true,
});

export interface PostgresStorageOptions {
  databaseUrl: string;
  /** Pool size; pg's default is 10. */
  maxConnections?: number;
}

/** Connects a pool to `databaseUrl`. Migrations are run by `openStorage`. */
export async function openPostgresStorage(options: PostgresStorageOptions): Promise<Storage> {
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: options.maxConnections ?? 10,
    application_name: "kiln",
    types: kilnPostgresTypes,
  });
  // An idle pooled connection that the server drops (restart, failover, idle timeout) emits
  // 'error' on the pool; without a listener Node treats it as unhandled and exits the process.
  // The pool discards that client by itself, and the next query reports any lasting outage.
  pool.on("error", () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    dialect: "postgres",
    capabilities: POSTGRES_CAPABILITIES,
    db,
    transaction: (fn, options) =>
      db.transaction().execute(async (trx) => {
        if (options?.durability === "relaxed") await sql`set local synchronous_commit = off`.execute(trx);
        return fn(trx);
      }),
    close: () => db.destroy(),
  };
}
