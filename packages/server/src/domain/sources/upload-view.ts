import type { SourceUpload } from "@kiln/contract";
import type { SourceUploadHeader, SourceUploadPartRow } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import type { SourceTotals } from "./manifest-types.js";

/** Whether an upload has expired: its hour passed while no job claimed it. */
export function isExpired(
  upload: Pick<SourceUploadHeader, "claimed_job" | "cleaned_at" | "expires_at">,
  now: Date,
): boolean {
  return upload.claimed_job === null && (upload.cleaned_at !== null || upload.expires_at <= now.toISOString());
}

/** Inclusive ranges of the part numbers 1..count not in `held`, ascending. */
export function missingRanges(count: number, held: ReadonlySet<number>): { first: number; last: number }[] {
  const ranges: { first: number; last: number }[] = [];
  for (let part = 1; part <= count; part++) {
    if (held.has(part)) continue;
    const last = ranges.at(-1);
    if (last !== undefined && last.last === part - 1) last.last = part;
    else ranges.push({ first: part, last: part });
  }
  return ranges;
}

/** `3`, `5-9, 12`: ranges as a detail names them. */
export function describeRanges(ranges: readonly { first: number; last: number }[]): string {
  return ranges.map((r) => (r.first === r.last ? `${r.first}` : `${r.first}-${r.last}`)).join(", ");
}

/** The SourceUpload document of an upload row and the parts it holds. */
export function uploadView(
  upload: SourceUploadHeader,
  parts: readonly SourceUploadPartRow[],
  now: Date,
): Static<typeof SourceUpload> {
  const expired = isExpired(upload, now) && upload.state !== "rejected";
  return {
    upload: upload.upload,
    tenant: upload.tenant_id,
    repository: upload.repository,
    reserved_by: upload.reserved_by,
    state: expired ? "expired" : upload.state,
    format_version: upload.format_version,
    manifest_sha256: upload.manifest_sha256,
    totals: JSON.parse(upload.totals) as SourceTotals,
    reserved_at: upload.reserved_at,
    expires_at: upload.expires_at,
    verified_at: upload.verified_at,
    completed_by: upload.completed_by,
    parts_received: parts.length,
    bytes_received: parts.reduce((sum, p) => sum + p.bytes, 0),
    missing_parts: missingRanges(upload.part_count, new Set(parts.map((p) => p.part))),
    rejection:
      upload.rejection === null ? null : (JSON.parse(upload.rejection) as { path: string | null; detail: string }),
    admission: {
      claimed: upload.claimed_job !== null,
      job: upload.claimed_job,
      claimed_at: upload.claimed_at,
    },
    counts_toward_reservation: upload.claimed_job === null && upload.cleaned_at === null,
  };
}
