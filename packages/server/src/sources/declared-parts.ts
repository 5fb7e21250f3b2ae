import { readUploadManifest, type SourceUploadHeader, type Storage } from "@kiln/storage";
import type { SourceManifest } from "./manifest-types.js";

type DeclaredParts = SourceManifest["parts"];

/** Uploads whose declared parts stay parsed in memory; a working set, not a store. */
const CAPACITY = 64;

/**
 * The parts an upload's manifest declares, parsed once per upload rather than once per chunk
 * request: a manifest of a large workspace is megabytes of JSON, and every chunk.put and
 * chunk.check needs one entry of it. Keyed by tenant, upload and manifest digest — an upload's
 * manifest never changes once reserved, so an entry can only be evicted, never stale. Least
 * recently used entries go first.
 */
export class DeclaredPartsCache {
  private readonly entries = new Map<string, DeclaredParts>();

  async partsOf(storage: Storage, upload: SourceUploadHeader): Promise<DeclaredParts> {
    const key = `${upload.tenant_id}\u0000${upload.upload}\u0000${upload.manifest_sha256}`;
    const cached = this.entries.get(key);
    if (cached !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached;
    }
    const text = await readUploadManifest(storage, { tenantId: upload.tenant_id, upload: upload.upload });
    const parts = text === undefined ? [] : (JSON.parse(text) as SourceManifest).parts;
    this.entries.set(key, parts);
    if (this.entries.size > CAPACITY) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return parts;
  }
}
