import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Dashboard and operator sessions, one-time sign-in links, device authorizations
 * (RFC 8628), shared request-rate windows and the operator bootstrap credential.
 * Secrets are stored only as SHA-256 digests, except the operator credential, which
 * the admin CLI must be able to show again and so is also kept encrypted.
 */
export function identity(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("sessions")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("tenant_id", "text")
        .addColumn("person_id", "text")
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addColumn("ended_at", "text")
        .execute();

      await db.schema
        .createTable("sign_in_links")
        .addColumn("token_hash", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("person_id", "text", (c) => c.notNull().references("persons.id"))
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addColumn("used_at", "text")
        .execute();

      await db.schema
        .createTable("device_authorizations")
        .addColumn("device_code_hash", "text", (c) => c.primaryKey())
        .addColumn("user_code", "text", (c) => c.notNull().unique())
        .addColumn("requesting_host", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("interval_seconds", "integer", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addColumn("last_polled_at", "text")
        .addColumn("approved_tenant_id", "text")
        .addColumn("approved_by", "text")
        .addColumn("approved_at", "text")
        .addColumn("cli_token_id", "text")
        .execute();

      await db.schema
        .createTable("rate_windows")
        .addColumn("bucket", "text", (c) => c.notNull())
        .addColumn("window_start", "text", (c) => c.notNull())
        .addColumn("count", "integer", (c) => c.notNull())
        .addPrimaryKeyConstraint("rate_windows_pk", ["bucket", "window_start"])
        .execute();

      await db.schema
        .createTable("operator_credentials")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("credential_hash", "text", (c) => c.notNull().unique())
        .addColumn("credential_ciphertext", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("retired_at", "text")
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const table of [
        "operator_credentials",
        "rate_windows",
        "device_authorizations",
        "sign_in_links",
        "sessions",
      ]) {
        await db.schema.dropTable(table).execute();
      }
    },
  };
}
