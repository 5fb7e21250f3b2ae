import type { Kysely, Migration } from "kysely";
import type { DialectName } from "../dialect.js";

/**
 * `source_uploads.manifest_deflated`: an upload's manifest as the server compressed it
 * (server/src/domain/sources/manifest-codec.ts), with `manifest` left empty; older rows keep their text
 * and a null here. A 40,000-file manifest is 7.8 MB of JSON and about 1 MB compressed, and the
 * compression runs where the body was parsed (the body worker, for a large one): on SQLite the
 * insert's megabytes are appended to the WAL on the event loop every tenant shares, and on
 * PostgreSQL the backend spent 40–110 ms of CPU compressing the text itself (reliability trial
 * T15). Opaque to storage: it stores and returns the bytes.
 */
export function uploadManifestsDeflated(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .alterTable("source_uploads")
        .addColumn("manifest_deflated", dialect === "postgres" ? "bytea" : "blob")
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("source_uploads").dropColumn("manifest_deflated").execute();
    },
  };
}
