import { claimUpload, type Db, insertJob, type JobRow, recordInlineSourceBytes } from "@kiln/storage";
import { refuse } from "../refusal.js";
import type { SourceManifestEntry } from "./source-manifest.js";

/**
 * A job's source as admitted (admitInlineSource, admitArchiveSource): the manifest the host
 * materializes, and what the job's insert transaction must record of the transfer that brought it.
 */
export interface AdmittedSource {
  readonly manifest: readonly SourceManifestEntry[];
  readonly transfer: SourceTransfer;
}

/**
 * A streamed archive's upload, claimed by the job (one upload sources exactly one job); or an
 * inline source's bytes, recorded as received source bytes (inline_source_bytes: the bandwidth
 * consumption and usage's bytes uploaded count them). An empty inline source records nothing.
 */
export type SourceTransfer =
  | { readonly kind: "archive"; readonly upload: string; readonly manifestSha256: string }
  | { readonly kind: "inline"; readonly bytes: number };

/**
 * Inserts the admitted job (storage insertJob) and, in the same transaction and before the
 * caller's own `onCreated`, records its source's transfer. A replay of the same submission key
 * finds its job and records nothing (insertJob's `created` is false).
 */
export function insertAdmittedJob(
  db: Db,
  input: {
    source: AdmittedSource;
    row: Parameters<typeof insertJob>[1];
    now: Date;
    onCreated?: (trx: Db, job: JobRow) => Promise<void>;
  },
): ReturnType<typeof insertJob> {
  const { transfer } = input.source;
  return insertJob(db, input.row, async (trx, job) => {
    if (transfer.kind === "archive") await claimArchive(trx, transfer, job, input.now);
    else if (transfer.bytes > 0) {
      await recordInlineSourceBytes(trx, {
        jobId: job.id,
        tenantId: job.tenant_id,
        repository: job.repository,
        submittedBy: job.submitted_by,
        bytes: transfer.bytes,
        receivedAt: job.accepted_at,
      });
    }
    await input.onCreated?.(trx, job);
  });
}

async function claimArchive(
  trx: Db,
  transfer: { readonly upload: string; readonly manifestSha256: string },
  job: JobRow,
  now: Date,
): Promise<void> {
  const claimed = await claimUpload(trx, {
    tenantId: job.tenant_id,
    upload: transfer.upload,
    manifestSha256: transfer.manifestSha256,
    jobId: job.id,
    now,
  });
  if (!claimed) {
    refuse(
      "conflict",
      `upload ${transfer.upload} was claimed by another submission, or expired, while this one was admitted`,
    );
  }
}
