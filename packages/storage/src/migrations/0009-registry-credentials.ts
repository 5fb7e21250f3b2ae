import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Private registry credentials (tenant.registry_credential.replace): every version of a
 * tenant's credential for one registry host, the value sealed (AES-256-GCM under the master
 * key, never in clear); `ciphertext` becomes null once the version is removed. A replacement
 * supersedes the prior version, which is removed once every host has acknowledged a newer one
 * (`registry_credential_acks`: per host and credential, the oldest version the host may still
 * use — the one an attempt in flight holds, else the current one).
 */
export function registryCredentials(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("registry_credentials")
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("registry", "text", (c) => c.notNull())
        .addColumn("version", "integer", (c) => c.notNull())
        .addColumn("ciphertext", "text")
        .addColumn("replaced_by", "text", (c) => c.notNull())
        .addColumn("replaced_at", "text", timestamp("replaced_at"))
        .addColumn("superseded_at", "text")
        .addColumn("removed_at", "text")
        .addPrimaryKeyConstraint("registry_credentials_pk", ["tenant_id", "registry", "version"])
        .execute();
      await db.schema
        .createTable("registry_credential_acks")
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("registry", "text", (c) => c.notNull())
        .addColumn("host_id", "text", (c) => c.notNull().references("hosts.id"))
        .addColumn("version", "integer", (c) => c.notNull())
        .addColumn("acknowledged_at", "text", timestamp("acknowledged_at"))
        .addPrimaryKeyConstraint("registry_credential_acks_pk", ["tenant_id", "registry", "host_id"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("registry_credential_acks").execute();
      await db.schema.dropTable("registry_credentials").execute();
    },
  };
}
