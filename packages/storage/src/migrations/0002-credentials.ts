import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";
import { timestamp } from "./0001-initial-schema.js";

/** CLI device tokens and agent credentials: hashes only, never values. */
export function credentials(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("cli_tokens")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("person_id", "text", (c) => c.notNull().references("persons.id"))
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("requesting_host", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("last_used_at", "text")
        .addColumn("revoked_at", "text")
        .addColumn("revoked_by", "text")
        .execute();
      await db.schema
        .createIndex("cli_tokens_by_person")
        .on("cli_tokens")
        .columns(["tenant_id", "person_id"])
        .execute();

      await db.schema
        .createTable("agent_credentials")
        .addColumn("id", dialect === "postgres" ? "bigint" : "integer", (c) =>
          dialect === "postgres" ? c.primaryKey().generatedAlwaysAsIdentity() : c.primaryKey().autoIncrement(),
        )
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("live_name", "text")
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("scopes", "text", (c) => c.notNull())
        .addColumn("created_by", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addColumn("last_used_at", "text")
        .addColumn("revoked_at", "text")
        .addColumn("revoked_by", "text")
        .addColumn("requests_per_minute", "integer", (c) => c.notNull().check(sql`requests_per_minute > 0`))
        .execute();
      // NULLs are distinct in unique indexes on both engines, so only live names collide.
      await db.schema
        .createIndex("agent_credentials_live_name")
        .on("agent_credentials")
        .columns(["tenant_id", "live_name"])
        .unique()
        .execute();
      await db.schema
        .createIndex("agent_credentials_by_creation")
        .on("agent_credentials")
        .columns(["tenant_id", "created_at", "id"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("agent_credentials").execute();
      await db.schema.dropTable("cli_tokens").execute();
    },
  };
}
