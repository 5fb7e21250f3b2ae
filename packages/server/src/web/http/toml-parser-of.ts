import type { TomlParser } from "../../domain/jobs/admission-source.js";
import { parseTomlDocument } from "../../domain/jobs/toml-document.js";
import type { BodyWorkerPool } from "./body-worker-pool.js";

/** Admission's TOML parser for one tenant: on a body worker in the tenant's turn, or here when the server runs none. */
export function tomlParserOf(pool: BodyWorkerPool | null, tenantId: string): TomlParser {
  if (pool === null) return async (bytes) => parseTomlDocument(bytes);
  return (bytes) => pool.parseToml(tenantId, bytes);
}
