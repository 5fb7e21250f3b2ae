import { type ColumnDefinitionBuilder, type CreateTableBuilder, type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";

/**
 * Tenants, people and memberships, onboarded repositories, idempotency receipts, and the two
 * append-only audit logs. Written with the schema builder so both engines share it; the only
 * engine-specific parts are the audit `sequence` column and the append-only triggers.
 */
export function initialSchema(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("tenants")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("display_name", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .execute();

      await db.schema
        .createTable("persons")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("email", "text", (c) => c.notNull().unique())
        .addColumn("display_name", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .execute();

      await db.schema
        .createTable("memberships")
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("person_id", "text", (c) => c.notNull().references("persons.id"))
        .addColumn("role", "text", (c) => c.notNull().check(sql`role in ('owner', 'admin', 'member', 'viewer')`))
        .addColumn("organization_id", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .addPrimaryKeyConstraint("memberships_pk", ["tenant_id", "person_id"])
        .execute();
      // "Which tenants is this person in" is asked at every sign-in.
      await db.schema.createIndex("memberships_by_person").on("memberships").column("person_id").execute();

      await db.schema
        .createTable("repositories")
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("onboarded_at", "text", timestamp("onboarded_at"))
        .addColumn("onboarded_by", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("repositories_pk", ["tenant_id", "name"])
        .execute();

      // No foreign key to tenants: operator mutations are keyed too, under a tenant id of their own.
      await db.schema
        .createTable("idempotency_keys")
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("key", "text", (c) => c.notNull())
        .addColumn("operation", "text", (c) => c.notNull())
        .addColumn("request_hash", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull().check(sql`state in ('in_flight', 'completed')`))
        .addColumn("reservation_token", "text", (c) => c.notNull())
        .addColumn("reserved_until", "text", timestamp("reserved_until"))
        .addColumn("response_status", "integer")
        .addColumn("response_body", "text")
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addPrimaryKeyConstraint("idempotency_keys_pk", ["tenant_id", "key"])
        .addCheckConstraint(
          "idempotency_keys_completed_has_response",
          sql`state = 'in_flight' or (response_status is not null and response_body is not null)`,
        )
        .execute();
      // For purging expired receipts.
      await db.schema.createIndex("idempotency_keys_by_expiry").on("idempotency_keys").column("expires_at").execute();

      await auditTable(db.schema.createTable("audit_entries"), dialect)
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("actor", "text", (c) => c.notNull())
        .addColumn("target", "text", (c) => c.notNull())
        .addColumn("value", "text", (c) => c.notNull())
        .addColumn("changed_at", "text", timestamp("changed_at"))
        .addColumn("effective", "text", (c) => c.notNull())
        .execute();
      // Serves "newest first" pages per tenant (list-audit-entries.ts) without a sort.
      await db.schema
        .createIndex("audit_entries_by_tenant_newest")
        .on("audit_entries")
        .columns(["tenant_id", "changed_at desc", "sequence desc"])
        .execute();

      await auditTable(db.schema.createTable("operator_audit_entries"), dialect)
        .addColumn("actor", "text", (c) => c.notNull())
        .addColumn("target", "text", (c) => c.notNull())
        .addColumn("value", "text", (c) => c.notNull())
        .addColumn("changed_at", "text", timestamp("changed_at"))
        .addColumn("effective", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("operator_audit_entries_newest")
        .on("operator_audit_entries")
        .columns(["changed_at desc", "sequence desc"])
        .execute();

      await refuseAuditChanges(db, dialect, "audit_entries");
      await refuseAuditChanges(db, dialect, "operator_audit_entries");
    },

    async down(db: Kysely<unknown>): Promise<void> {
      for (const table of [
        "operator_audit_entries",
        "audit_entries",
        "idempotency_keys",
        "repositories",
        "memberships",
        "persons",
        "tenants",
      ]) {
        await db.schema.dropTable(table).execute();
      }
      if (dialect === "postgres") {
        await sql`drop function refuse_audit_change()`.execute(db);
      }
    },
  };
}

/**
 * A NOT NULL text timestamp whose shape is checked, because ordering and range queries compare
 * these as text and rely on the fixed-width `YYYY-MM-DDTHH:MM:SS.mmmZ` form (timestamps.ts).
 * (`_` matches exactly one character, so the pattern also fixes the length.)
 */
export function timestamp(name: string): (column: ColumnDefinitionBuilder) => ColumnDefinitionBuilder {
  return (column) => column.notNull().check(sql`${sql.ref(name)} like '____-__-__T__:__:__.___Z'`);
}

/**
 * The audit `sequence`: an integer that only the database assigns, in insertion order.
 * SQLite: `INTEGER PRIMARY KEY AUTOINCREMENT` (never reuses a value, even after the newest row
 * is gone). PostgreSQL: `GENERATED ALWAYS AS IDENTITY`, which also refuses caller-chosen values.
 */
function auditTable<T extends string>(table: CreateTableBuilder<T, never>, dialect: DialectName) {
  return dialect === "sqlite"
    ? table.addColumn("sequence", "integer", (c) => c.primaryKey().autoIncrement())
    : table.addColumn("sequence", "bigint", (c) => c.primaryKey().generatedAlwaysAsIdentity());
}

/**
 * Audit entries are append-only, and the database itself enforces it, so no code path (or
 * operator with a SQL shell) can rewrite history by accident. Both engines raise the same message.
 */
async function refuseAuditChanges(db: Kysely<unknown>, dialect: DialectName, table: string): Promise<void> {
  const name = sql.raw(table);
  if (dialect === "sqlite") {
    await sql`create trigger ${sql.raw(`${table}_no_update`)} before update on ${name}
      begin select raise(abort, 'audit entries are append-only'); end`.execute(db);
    await sql`create trigger ${sql.raw(`${table}_no_delete`)} before delete on ${name}
      begin select raise(abort, 'audit entries are append-only'); end`.execute(db);
    return;
  }
  await sql`create or replace function refuse_audit_change() returns trigger language plpgsql as $$
    begin
      raise exception 'audit entries are append-only' using errcode = 'restrict_violation';
    end
  $$`.execute(db);
  await sql`create trigger ${sql.raw(`${table}_append_only`)} before update or delete on ${name}
    for each row execute function refuse_audit_change()`.execute(db);
  // Row triggers do not fire for TRUNCATE, which would otherwise empty the table silently.
  await sql`create trigger ${sql.raw(`${table}_no_truncate`)} before truncate on ${name}
    for each statement execute function refuse_audit_change()`.execute(db);
}
