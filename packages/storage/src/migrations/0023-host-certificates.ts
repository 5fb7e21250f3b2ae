import { type Kysely, type Migration, sql } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Remote hosts authenticate with client certificates from the control plane's own CA (issue 17):
 *
 * - `certificate_authorities`: the CA (one row, `host-ca`): its certificate and its private key
 *   sealed under the master key (AES-256-GCM, never in clear), so every kiln-server of a
 *   deployment issues and verifies with the same CA. Created once, by whichever server needs
 *   it first (an insert that does nothing when a row exists, then a read).
 * - `issued_certificates`: every certificate the CA issued, by serial (upper-case hex): a host's
 *   client certificate (`role = 'host'`, from an enrollment token or a renewal over the current
 *   certificate) or a host listener's server certificate (`role = 'listener'`, its key sealed
 *   like the CA's, so the servers of a deployment share it). A request presenting a host
 *   certificate is taken only while its row is unrevoked; revoking a host sets `revoked_at` on
 *   every one of its rows.
 * - `host_credentials` (the bearer credentials of 0012) is dropped: a certificate is now the
 *   only way a remote host authenticates.
 */
export function hostCertificates(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("certificate_authorities")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("certificate_pem", "text", (c) => c.notNull())
        .addColumn("certificate_sha256", "text", (c) => c.notNull())
        .addColumn("sealed_private_key", "text", (c) => c.notNull())
        .addColumn("created_at", "text", timestamp("created_at"))
        .execute();
      await db.schema
        .createTable("issued_certificates")
        .addColumn("serial", "text", (c) => c.primaryKey())
        .addColumn("role", "text", (c) => c.notNull().check(sql`role in ('host', 'listener')`))
        .addColumn("host_id", "text")
        .addColumn("subject", "text", (c) => c.notNull())
        .addColumn("names", "text")
        .addColumn("certificate_pem", "text", (c) => c.notNull())
        .addColumn("certificate_sha256", "text", (c) => c.notNull())
        .addColumn("sealed_private_key", "text")
        .addColumn("issued_via", "text", (c) => c.notNull())
        .addColumn("enrollment_token_hash", "text", (c) => c.references("host_enrollment_tokens.token_hash"))
        .addColumn("renewed_from", "text")
        .addColumn("not_before", "text", timestamp("not_before"))
        .addColumn("not_after", "text", timestamp("not_after"))
        .addColumn("issued_at", "text", timestamp("issued_at"))
        .addColumn("revoked_at", "text")
        .execute();
      await db.schema
        .createIndex("issued_certificates_role_host")
        .on("issued_certificates")
        .columns(["role", "host_id", "issued_at"])
        .execute();
      await db.schema.dropIndex("host_credentials_host").execute();
      await db.schema.dropTable("host_credentials").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("host_credentials")
        .addColumn("token_hash", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("enrollment_token_hash", "text", (c) => c.notNull().references("host_enrollment_tokens.token_hash"))
        .addColumn("issued_at", "text", timestamp("issued_at"))
        .addColumn("revoked_at", "text")
        .execute();
      await db.schema.createIndex("host_credentials_host").on("host_credentials").column("host_id").execute();
      await db.schema.dropIndex("issued_certificates_role_host").execute();
      await db.schema.dropTable("issued_certificates").execute();
      await db.schema.dropTable("certificate_authorities").execute();
    },
  };
}
