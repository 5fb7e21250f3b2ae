import type { KilnClient } from "@kiln/client";
import type { Capture } from "./capture.js";
import { type Archive, buildArchive } from "./layout.js";
import { readClaimedGeneration, readLayoutCache, writeLayoutCache } from "./layout-cache.js";
import { StaleLayoutError, type UploadOptions, type UploadSummary, uploadArchive } from "./upload.js";

export interface WorkspaceUploadOptions extends Omit<UploadOptions, "archive"> {
  readonly capture: Capture;
  /** The layout cache file for this endpoint and repository (layout-cache.ts); none: lay out afresh. */
  readonly layoutCache?: string;
  /** Called with each archive before it is uploaded (a second time if the cached layout was stale). */
  readonly onArchive?: (archive: Archive) => void;
}

/**
 * Lays the captured tree out (reusing the last verified upload's packs when the cache has
 * them), uploads it, and keeps its packs for the next run. When the service no longer holds a
 * reused pack that cannot be rebuilt from the tree, it lays the tree out afresh and uploads
 * that instead; the abandoned reservation expires on its own within the hour.
 */
export async function uploadWorkspace(
  client: KilnClient,
  options: WorkspaceUploadOptions,
): Promise<{ archive: Archive; summary: UploadSummary }> {
  const { capture, layoutCache, onArchive, ...upload } = options;
  const previous = layoutCache === undefined ? undefined : readLayoutCache(layoutCache);
  let archive = buildArchive(capture, previous);
  onArchive?.(archive);
  // The generation after the one the last job of these very bytes claimed (see layout-cache.ts).
  const claimed = layoutCache === undefined ? undefined : readClaimedGeneration(layoutCache, archive.layoutSha256);
  let summary: UploadSummary;
  try {
    summary = await uploadArchive(client, {
      ...upload,
      archive,
      ...(claimed === undefined ? {} : { firstGeneration: claimed + 1 }),
    });
  } catch (error) {
    if (!(error instanceof StaleLayoutError)) throw error;
    archive = buildArchive(capture);
    onArchive?.(archive);
    summary = await uploadArchive(client, { ...upload, archive });
  }
  if (layoutCache !== undefined) {
    try {
      writeLayoutCache(layoutCache, archive.packs);
    } catch {
      // A cache that cannot be written only makes the next upload lay out afresh.
    }
  }
  return { archive, summary };
}
