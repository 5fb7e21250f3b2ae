import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Remote hosts' identities (issue 17, first slice):
 *
 * - `host_enrollment_tokens`: one-time tokens an operator mints for one host id
 *   (`kiln-server admin host enrollment-token`), stored as SHA-256 digests only; redeeming one
 *   sets `redeemed_at` in a conditional write, so it works exactly once, and only before
 *   `expires_at`.
 * - `host_credentials`: the credential a redeemed token gave its host (`kiln_host_…`), a digest
 *   only, revoked by setting `revoked_at`. Every request of the HTTP host protocol presents one.
 */
export function hostIdentities(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("host_enrollment_tokens")
        .addColumn("token_hash", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("created_by", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addColumn("redeemed_at", "text")
        .execute();
      await db.schema
        .createTable("host_credentials")
        .addColumn("token_hash", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("enrollment_token_hash", "text", (c) => c.notNull().references("host_enrollment_tokens.token_hash"))
        .addColumn("issued_at", "text", timestamp("issued_at"))
        .addColumn("revoked_at", "text")
        .execute();
      await db.schema.createIndex("host_credentials_host").on("host_credentials").column("host_id").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("host_credentials_host").execute();
      await db.schema.dropTable("host_credentials").execute();
      await db.schema.dropTable("host_enrollment_tokens").execute();
    },
  };
}
