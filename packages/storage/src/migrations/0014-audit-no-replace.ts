import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";

const TABLES = ["audit_entries", "operator_audit_entries"] as const;

/**
 * Audit entries stay append-only under SQLite's REPLACE too. `INSERT OR REPLACE` (and `REPLACE
 * INTO`) onto an existing sequence deletes the old row as conflict resolution, which fires no
 * delete trigger (SQLite fires them there only under `recursive_triggers`, a per-connection
 * setting a SQL shell does not have), so 0001's triggers let an entry be rewritten in place.
 * A before-insert trigger refuses any insert naming a sequence that is taken, on every
 * connection. PostgreSQL needs nothing: its sequence is an identity column, and an upsert's
 * update fires the update trigger (reliability trial T9 tries both).
 */
export function auditNoReplace(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      if (dialect !== "sqlite") return;
      for (const table of TABLES) {
        await sql`create trigger ${sql.raw(`${table}_no_replace`)} before insert on ${sql.raw(table)}
          when exists (select 1 from ${sql.raw(table)} where sequence = new.sequence)
          begin select raise(abort, 'audit entries are append-only'); end`.execute(db);
      }
    },
    async down(db: Kysely<unknown>): Promise<void> {
      if (dialect !== "sqlite") return;
      for (const table of TABLES) await sql`drop trigger ${sql.raw(`${table}_no_replace`)}`.execute(db);
    },
  };
}
