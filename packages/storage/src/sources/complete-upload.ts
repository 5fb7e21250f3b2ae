import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import { SOURCE_UPLOAD_HEADER_COLUMNS, type SourceUploadHeader } from "./upload-row.js";

export interface UploadCompletion {
  readonly tenantId: string;
  readonly upload: string;
  readonly completedBy: string;
  readonly now: Date;
  /** What verification found: verified, or rejected with the reason. */
  readonly outcome:
    | { readonly state: "verified" }
    | { readonly state: "rejected"; readonly rejection: { path: string | null; detail: string } };
}

/**
 * Records the outcome of completing an upload — once. The write is conditional on the upload
 * still being `reserved` (and not cleaned up), so of two completions racing (each verified the
 * parts on its own) exactly one records its outcome and its principal; the other, like any later
 * repeat, reads the recorded upload back and returns it, so the original owner is preserved.
 */
export async function completeUpload(
  storage: Storage,
  input: UploadCompletion,
): Promise<SourceUploadHeader | undefined> {
  const now = formatTimestamp(input.now);
  const updated = await storage.db
    .updateTable("source_uploads")
    .set({
      state: input.outcome.state,
      verified_at: input.outcome.state === "verified" ? now : null,
      completed_by: input.completedBy,
      rejection: input.outcome.state === "rejected" ? JSON.stringify(input.outcome.rejection) : null,
    })
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .where("state", "=", "reserved")
    .where("cleaned_at", "is", null)
    .returning(SOURCE_UPLOAD_HEADER_COLUMNS)
    .executeTakeFirst();
  if (updated !== undefined) return updated;
  return storage.db
    .selectFrom("source_uploads")
    .select(SOURCE_UPLOAD_HEADER_COLUMNS)
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .executeTakeFirst();
}
