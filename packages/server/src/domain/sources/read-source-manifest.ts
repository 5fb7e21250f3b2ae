import { readUploadManifest, type SourceUploadHeader, type Storage } from "@kiln/storage";
import { manifestJsonOf } from "./manifest-codec.js";
import type { SourceManifest } from "./manifest-types.js";

/**
 * An upload's manifest, parsed: read on its own, since every other read of an upload carries
 * only its header (the manifest is a megabyte of compressed bytes for 40,000 files). Undefined
 * if the upload is gone.
 */
export async function readSourceManifest(
  storage: Storage,
  upload: Pick<SourceUploadHeader, "tenant_id" | "upload">,
): Promise<SourceManifest | undefined> {
  const stored = await readUploadManifest(storage, { tenantId: upload.tenant_id, upload: upload.upload });
  return stored === undefined ? undefined : (JSON.parse(await manifestJsonOf(stored)) as SourceManifest);
}
