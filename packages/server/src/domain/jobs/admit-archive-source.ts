import { createHash } from "node:crypto";
import { type BlobStore, readUpload, type Storage } from "@kiln/storage";
import { refuse } from "../refusal.js";
import { readSourceManifest } from "../sources/read-source-manifest.js";
import { isExpired } from "../sources/upload-view.js";
import { refuseOversizedCargoFiles } from "./admission-source.js";
import { admitInvocation } from "./admit-inline-source.js";
import type { AdmittedSource } from "./admitted-source.js";
import type { SourceManifestEntry } from "./source-manifest.js";

export interface ArchiveReference {
  readonly upload: string;
  readonly manifest_sha256: string;
}

/**
 * A streamed archive as a job's source (schema_version 2): only a verified, unexpired,
 * unclaimed upload of the same tenant and repository whose manifest_sha256 matches. The job's
 * source manifest lists the archive's entries (each file as slices of the part blobs it was
 * uploaded in, verified at completion; symlinks carried as such), and the upload is claimed in the job's insert transaction, so one
 * upload sources exactly one job. A replay of the same submission never reaches here (the
 * submission key finds its job first).
 */
export async function admitArchiveSource(
  deps: { storage: Storage; blobs: BlobStore },
  input: {
    tenantId: string;
    repository: string;
    archive: ArchiveReference;
    invocation: Parameters<typeof admitInvocation>[0];
    now: Date;
  },
): Promise<AdmittedSource> {
  const { archive, repository } = input;
  const found = await readUpload(deps.storage, { tenantId: input.tenantId, upload: archive.upload });
  if (found === undefined || found.upload.repository !== repository) {
    return refuse(
      "not_found",
      `body.workspace.source.archive.upload ${archive.upload} is not an upload of ${repository} for this tenant`,
    );
  }
  const upload = found.upload;
  if (upload.claimed_job !== null) {
    refuse("conflict", `upload ${upload.upload} already sources job ${upload.claimed_job}; an upload sources one job`);
  }
  if (isExpired(upload, input.now)) {
    refuse("gone", `upload ${upload.upload} expired at ${upload.expires_at} unclaimed`, {
      expired_at: upload.expires_at,
    });
  }
  if (upload.state !== "verified") {
    refuse(
      "conflict",
      `upload ${upload.upload} is ${upload.state}, not verified${upload.state === "reserved" ? "; call sources.complete first" : ""}`,
    );
  }
  if (upload.manifest_sha256 !== archive.manifest_sha256) {
    refuse(
      "conflict",
      `body.workspace.source.archive.manifest_sha256 ${archive.manifest_sha256} is not upload ${upload.upload}'s (${upload.manifest_sha256})`,
    );
  }
  const manifest =
    (await readSourceManifest(deps.storage, upload)) ?? refuse("not_found", `no upload ${upload.upload}`);
  admitInvocation(input.invocation, manifest.entries);

  const partDigest = (part: number) => manifest.parts[part - 1]?.sha256 ?? "";
  const entries: SourceManifestEntry[] = manifest.entries.map((entry) =>
    entry.kind === "file"
      ? {
          path: entry.path,
          sha256: entry.sha256,
          bytes: entry.size,
          executable: entry.executable,
          segments: entry.segments.map((s) => ({ part: partDigest(s.part), offset: s.offset, length: s.length })),
        }
      : {
          path: entry.path,
          kind: "symlink",
          target: entry.target,
          sha256: createHash("sha256").update(entry.target).digest("hex"),
          bytes: 0,
          executable: false,
        },
  );
  refuseOversizedCargoFiles(entries);
  return {
    manifest: entries,
    transfer: { kind: "archive", upload: upload.upload, manifestSha256: archive.manifest_sha256 },
  };
}
