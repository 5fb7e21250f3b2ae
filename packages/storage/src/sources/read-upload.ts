import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { SourceUploadPartRow, SourceUploadRow } from "./upload-row.js";

/** An upload of the tenant with the parts it holds (by part number), or undefined. */
export async function readUpload(
  target: StorageOrTransaction,
  input: { tenantId: string; upload: string },
): Promise<{ upload: SourceUploadRow; parts: SourceUploadPartRow[] } | undefined> {
  const db = executorOf(target);
  const upload = await db
    .selectFrom("source_uploads")
    .selectAll()
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .executeTakeFirst();
  if (upload === undefined) return undefined;
  const parts = await db
    .selectFrom("source_upload_parts")
    .selectAll()
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .orderBy("part")
    .execute();
  return { upload, parts };
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
