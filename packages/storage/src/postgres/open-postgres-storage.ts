import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import type { Capabilities, Storage } from "../dialect.js";
import type { NoticeConnection, NoticeHandlers } from "../notifications/notice-connection.js";
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
    listen: (channels, handlers) => listenOnPostgres(options.databaseUrl, channels, handlers),
    close: () => db.destroy(),
  };
}

/**
 * A connection of its own (LISTEN holds a session: a pooled one would be handed to other
 * queries and released), kept alive by TCP keepalive so a dead peer is found by the kernel.
 * Its 'error' and 'end' both mean lost (reported once); a notice arrives as the committing
 * transaction's COMMIT completes, from any process on the database, this one included.
 */
async function listenOnPostgres(
  databaseUrl: string,
  channels: readonly string[],
  handlers: NoticeHandlers,
): Promise<NoticeConnection> {
  const client = new pg.Client({
    connectionString: databaseUrl,
    application_name: "kiln-listen",
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  let closing = false;
  let reported = false;
  const lost = (error: Error) => {
    if (closing || reported) return;
    reported = true;
    handlers.onLost(error);
  };
  client.on("error", (error) => lost(error));
  client.on("end", () => lost(new Error("the listening connection to PostgreSQL ended")));
  client.on("notification", (message) => handlers.onNotice(message.channel, message.payload ?? ""));
  try {
    await client.connect();
    for (const channel of channels) await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
  } catch (error) {
    closing = true;
    await client.end().catch(() => {});
    throw error;
  }
  const backendPid = (client as unknown as { processID?: number }).processID ?? null;
  return {
    backendPid,
    close: async () => {
      closing = true;
      await client.end();
    },
  };
}
