import { promisify } from "node:util";
import { deflateRawSync, inflateRaw, inflateRawSync } from "node:zlib";
import type { StoredUploadManifest } from "@kiln/storage";

const inflateRawAsync = promisify(inflateRaw);

/**
 * How an upload's manifest is stored (`source_uploads.manifest_deflated`, migration 0040): its
 * JSON as UTF-8, raw DEFLATE at level 1. A 40,000-file manifest is 7.8 MB of JSON and about
 * 1 MB compressed; level 1 takes tens of milliseconds for that, spent where the body was parsed
 * (the body worker, for a large body), so the database writes a seventh of the bytes and the
 * event loop none of the compression.
 *
 * Deliberately free of storage at run time (a type import only): the body worker imports it.
 */
export function deflateManifestJson(json: string): Uint8Array {
  const deflated = deflateRawSync(Buffer.from(json, "utf8"), { level: 1 });
  // A buffer of its own (not a view of a pool), so the worker can hand it over.
  return deflated.byteOffset === 0 && deflated.byteLength === deflated.buffer.byteLength
    ? deflated
    : Uint8Array.prototype.slice.call(deflated);
}

/**
 * The manifest's JSON from a stored row: inflated on libuv's thread pool (not the event loop)
 * when compressed, or the text of a row reserved before the manifests were.
 */
export async function manifestJsonOf(stored: StoredUploadManifest): Promise<string> {
  if (stored.manifest_deflated === null) return stored.manifest;
  return (await inflateRawAsync(stored.manifest_deflated)).toString("utf8");
}

/** The JSON of compressed manifest bytes, inflated on the calling thread (a body's lazy restore: see body-preparations.ts). */
export function inflateManifestJsonSync(deflated: Uint8Array): string {
  return inflateRawSync(deflated).toString("utf8");
}
