import type { SourceUploadHeader, Storage } from "@kiln/storage";
import type { SourceManifest } from "./manifest-types.js";
import { readSourceManifest } from "./read-source-manifest.js";

/** What chunk requests need of a manifest: its parts, and the one-segment files each part holds. */
export interface DeclaredParts {
  readonly parts: SourceManifest["parts"];
  /** Per part number, the distinct [offset, length] of files held whole inside it (packed files). */
  readonly slices: ReadonlyMap<number, readonly (readonly [number, number])[]>;
}

function declaredPartsOf(manifest: SourceManifest | undefined): DeclaredParts {
  const slices = new Map<number, [number, number][]>();
  const seen = new Set<string>();
  for (const entry of manifest?.entries ?? []) {
    if (entry.kind !== "file" || entry.segments.length !== 1) continue;
    const [segment] = entry.segments;
    // A file that is a whole part has the part's digest, checked at chunk.put: nothing to hash.
    if (
      segment === undefined ||
      (segment.offset === 0 && segment.length === manifest?.parts[segment.part - 1]?.bytes)
    ) {
      continue;
    }
    const key = `${segment.part}:${segment.offset}:${segment.length}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const list = slices.get(segment.part) ?? [];
    list.push([segment.offset, segment.length]);
    slices.set(segment.part, list);
  }
  return { parts: manifest?.parts ?? [], slices };
}

/** Uploads whose declared parts stay parsed in memory; a working set, not a store. */
const CAPACITY = 64;

/**
 * The parts an upload's manifest declares (and the packed files in each), parsed once per upload rather than once per chunk
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
    const parts = declaredPartsOf(await readSourceManifest(storage, upload));
    this.entries.set(key, parts);
    if (this.entries.size > CAPACITY) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return parts;
  }
}
