import { executorOf, type StorageOrTransaction } from "../executor.js";
import {
  SOURCE_UPLOAD_HEADER_COLUMNS,
  type SourceUploadHeader,
  type SourceUploadPartRow,
  type SourceUploadRow,
} from "./upload-row.js";

/**
 * An upload of the tenant without its manifest, with the parts it holds (by part number), or
 * undefined. The manifest (a megabyte of compressed bytes for a workspace of 40,000 files, read
 * on the event loop) is read on its own by readUploadManifest where it is used.
 */
export async function readUpload(
  target: StorageOrTransaction,
  input: { tenantId: string; upload: string },
): Promise<{ upload: SourceUploadHeader; parts: SourceUploadPartRow[] } | undefined> {
  const db = executorOf(target);
  const upload = await db
    .selectFrom("source_uploads")
    .select(SOURCE_UPLOAD_HEADER_COLUMNS)
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .executeTakeFirst();
  if (upload === undefined) return undefined;
  return { upload, parts: await readUploadParts(db, input) };
}

/** The parts an upload holds, by part number. */
export async function readUploadParts(
  target: StorageOrTransaction,
  input: { tenantId: string; upload: string },
): Promise<SourceUploadPartRow[]> {
  return executorOf(target)
    .selectFrom("source_upload_parts")
    .selectAll()
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .orderBy("part")
    .execute();
}

/** One held part of an upload, or undefined. */
export async function readUploadPart(
  target: StorageOrTransaction,
  input: { tenantId: string; upload: string; part: number },
): Promise<SourceUploadPartRow | undefined> {
  return executorOf(target)
    .selectFrom("source_upload_parts")
    .selectAll()
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .where("part", "=", input.part)
    .executeTakeFirst();
}

/**
 * The upload's row without its manifest, and one of its parts if held: two point reads by
 * primary key. A chunk request reads this instead of readUpload, whose cost (the manifest's
 * text and every held part) would grow with the upload and make an upload of N parts O(N²).
 */
export async function readUploadForPart(
  target: StorageOrTransaction,
  input: { tenantId: string; upload: string; part: number },
): Promise<{ upload: SourceUploadHeader; part: SourceUploadPartRow | undefined } | undefined> {
  const db = executorOf(target);
  const upload = await db
    .selectFrom("source_uploads")
    .select(SOURCE_UPLOAD_HEADER_COLUMNS)
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .executeTakeFirst();
  if (upload === undefined) return undefined;
  return { upload, part: await readUploadPart(db, input) };
}

/** An upload's manifest as stored (its text, or the server's compressed bytes), or undefined. */
export type StoredUploadManifest = Pick<SourceUploadRow, "manifest" | "manifest_deflated">;

/** The manifest of an upload as stored, or undefined. */
export async function readUploadManifest(
  target: StorageOrTransaction,
  input: { tenantId: string; upload: string },
): Promise<StoredUploadManifest | undefined> {
  return executorOf(target)
    .selectFrom("source_uploads")
    .select(["manifest", "manifest_deflated"])
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .executeTakeFirst();
}
