import { Type } from "@sinclair/typebox";
import { Closed, Nullable, RepositoryName, Timestamp } from "../schema-helpers.js";

/** Lowercase hexadecimal SHA-256 digest. */
export const SHA256_HEX_PATTERN = "^[0-9a-f]{64}$";
export const Sha256Hex = (description = "SHA-256 digest, 64 lowercase hexadecimal digits.") =>
  Type.String({ pattern: SHA256_HEX_PATTERN, description });

/** Upload id = the source mutations' idempotency key (spec, Limits). */
export const UPLOAD_ID_PATTERN = "^[A-Za-z0-9_.:-]{1,128}$";
export const UploadId = (description = "Upload id: 1 to 128 ASCII letters, digits, `-`, `_`, `.`, `:`.") =>
  Type.String({ pattern: UPLOAD_ID_PATTERN, description });

/**
 * A canonical repository-relative path: `/`-separated, no leading or trailing `/`,
 * no empty, `.` or `..` segment, no control character.
 */
export const REPOSITORY_PATH_PATTERN = "^(?!/)(?!.*//)(?!.*/$)(?!(?:.*/)?\\.\\.?(?:/|$))[^\\u0000-\\u001f\\u007f]+$";
export const RepositoryPath = (
  description = "Canonical repository-relative path: `/`-separated, no leading or trailing `/`, no empty, `.` or `..` segment, no control character; at most 4096 bytes of UTF-8.",
) => Type.String({ pattern: REPOSITORY_PATH_PATTERN, minLength: 1, maxLength: 4096, description });

/** Transport constants (spec, Limits). SourceCapabilities reports them at runtime. */
export const SOURCE_LIMITS = {
  maxChunkBytes: 4194304,
  maxParts: 262144,
  maxFileBytes: 1073741824,
  maxEntries: 250000,
  maxDirectories: 250000,
  maxMetadataBytes: 33554432,
  maxPathBytes: 4096,
  uploadLifetimeSeconds: 3600,
  tenantReservationBytes: 17179869184,
  tenantUnclaimedUploads: 32,
  formatVersions: [1],
} as const;

export const PartNumber = (description = "Part number, 1 to N; the manifest's parts are numbered contiguously.") =>
  Type.Integer({ minimum: 1, maximum: SOURCE_LIMITS.maxParts, description });

const ByteCount = (description: string, maximum?: number) =>
  Type.Integer(maximum === undefined ? { minimum: 0, description } : { minimum: 0, maximum, description });

export const SourceCapabilities = Closed(
  "SourceCapabilities",
  {
    repository: RepositoryName("The repository the answer applies to."),
    format_versions: Type.Array(Type.Integer({ minimum: 1 }), {
      minItems: 1,
      description: "Manifest format versions sources.reserve accepts (`format_version`); currently [1].",
    }),
    digest_algorithm: Type.Literal("sha256", {
      description: "Digest of parts, files and the manifest: SHA-256 as 64 lowercase hexadecimal digits.",
    }),
    max_chunk_bytes: Type.Integer({
      minimum: 1,
      description: "Largest part sources.chunk.put accepts: 4194304 (4 MiB).",
    }),
    max_parts: Type.Integer({ minimum: 1, description: "Largest part number an upload may declare." }),
    upload_lifetime_seconds: Type.Integer({
      minimum: 1,
      description: "Seconds from reservation until an unclaimed upload expires: 3600.",
    }),
    limits: Type.Object(
      {
        file_bytes: ByteCount("Regular-file budget: the most bytes of file content one archive holds (1 GiB)."),
        entries: Type.Integer({ minimum: 1, description: "Most file and symlink entries (250000)." }),
        directories: Type.Integer({
          minimum: 1,
          description: "Most distinct directories implied by the entry paths (250000).",
        }),
        metadata_bytes: ByteCount("Most bytes of the manifest's canonical form (32 MiB); see manifest_sha256."),
        path_bytes: Type.Integer({ minimum: 1, description: "Longest entry path or symlink target in UTF-8 bytes." }),
      },
      { additionalProperties: false, description: "Per-archive limits, checked at reservation." },
    ),
    tenant_reservations: Type.Object(
      {
        max_bytes: ByteCount("Most part bytes the tenant's unclaimed uploads may reserve together (16 GiB)."),
        max_unclaimed_uploads: Type.Integer({ minimum: 1, description: "Most unclaimed uploads at once (32)." }),
        reserved_bytes: ByteCount(
          "Part bytes currently reserved, including expired uploads whose cleanup has not completed.",
        ),
        unclaimed_uploads: Type.Integer({ minimum: 0, description: "Uploads currently counted as unclaimed." }),
      },
      { additionalProperties: false, description: "The tenant's upload reservations: limits beside consumption." },
    ),
  },
  {
    description:
      "What the streamed archive transport accepts for a repository. Read it before sources.reserve and build the manifest within these values.",
  },
);

const SourceSegment = Type.Object(
  {
    part: PartNumber("The part holding this piece of the file."),
    offset: ByteCount("Byte offset of the piece inside the part.", SOURCE_LIMITS.maxChunkBytes - 1),
    length: Type.Integer({
      minimum: 1,
      maximum: SOURCE_LIMITS.maxChunkBytes,
      description: "Bytes of the piece; offset + length is at most the part's bytes.",
    }),
  },
  { additionalProperties: false, description: "A contiguous piece of a file's content stored in one part." },
);

const SourceFileEntry = Type.Object(
  {
    kind: Type.Literal("file"),
    path: RepositoryPath(),
    executable: Type.Boolean({ description: "Preserve the executable mode (0755 rather than 0644)." }),
    size: ByteCount("Bytes of the file's content.", SOURCE_LIMITS.maxFileBytes),
    sha256: Sha256Hex("SHA-256 of the file's whole content."),
    segments: Type.Array(SourceSegment, {
      description:
        "The file's content in order: the concatenation of the segments' bytes is exactly the file (their lengths sum to size, and its SHA-256 is sha256). Empty for an empty file. Identical files may name the same segments.",
    }),
  },
  { additionalProperties: false, description: "A regular file." },
);

const SourceSymlinkEntry = Type.Object(
  {
    kind: Type.Literal("symlink"),
    path: RepositoryPath(),
    target: Type.String({
      minLength: 1,
      maxLength: 4096,
      pattern: "^(?!/)[^\\u0000-\\u001f\\u007f]+$",
      description:
        "Link target, stored verbatim. Relative only; resolved from the link's directory it must stay inside the source tree (else invalid_request).",
    }),
  },
  { additionalProperties: false, description: "A symbolic link." },
);

const SourcePart = Type.Object(
  {
    part: PartNumber(),
    sha256: Sha256Hex("SHA-256 of the part's bytes; sources.chunk.put and sources.chunk.check must match it."),
    bytes: Type.Integer({
      minimum: 1,
      maximum: SOURCE_LIMITS.maxChunkBytes,
      description: "Length of the part, 1 to 4194304 bytes.",
    }),
  },
  { additionalProperties: false },
);

const SourceTotals = Type.Object(
  {
    file_bytes: ByteCount("Sum of every file entry's size; at most limits.file_bytes."),
    entries: Type.Integer({ minimum: 0, description: "File plus symlink entries; at most limits.entries." }),
    directories: Type.Integer({
      minimum: 0,
      description:
        "Distinct directories implied by the entry paths (every proper prefix ending before a `/`; the root not counted); at most limits.directories.",
    }),
    metadata_bytes: ByteCount("Byte length of the manifest's canonical form (see manifest_sha256)."),
    parts: Type.Integer({ minimum: 0, description: "Number of parts." }),
    part_bytes: ByteCount("Sum of every part's bytes; what the upload reserves against the tenant's 16 GiB."),
  },
  {
    additionalProperties: false,
    description:
      "Totals the client declares so limits are checked before any byte is sent; each must equal what the manifest implies, else invalid_request.",
  },
);

export const SourceReservation = Closed(
  "SourceReservation",
  {
    repository: RepositoryName("The onboarded repository the source belongs to; the upload is bound to it."),
    format_version: Type.Integer({ minimum: 1, description: "Manifest format version; 1." }),
    totals: SourceTotals,
    manifest: Type.Object(
      {
        entries: Type.Array(Type.Union([SourceFileEntry, SourceSymlinkEntry]), {
          description:
            "Every regular file and symlink of the source tree, sorted by path in UTF-8 byte order, paths unique. Directories are implied by paths (empty directories are not kept).",
        }),
        parts: Type.Array(SourcePart, {
          description:
            "Every part, sorted by part number, numbered 1..N without gaps. A part may hold bytes outside every segment (a pack reused after one of its files changed: they are stored but never reach a job), at most as many in all as the segments cover (else invalid_request).",
        }),
      },
      { additionalProperties: false, description: "The archive's table of contents and its part layout." },
    ),
  },
  {
    description: [
      "Reserves a streamed source archive upload. The idempotency-key header is the upload id.",
      "Transport: a file's bytes are stored in parts, opaque byte strings of 1 to 4194304 bytes each identified by a part number and their SHA-256; each file lists the segments {part, offset, length} that concatenate to its content.",
      "Flow: read sources.capabilities; reserve with this manifest — a new reservation already holds (origin reused) every part whose bytes the tenant stored before, so its missing_parts lists only the parts to send; send each missing part with sources.chunk.put (sources.chunk.check answers for one part whether it is held, attaching it when the tenant holds it by then); call sources.complete; submit jobs.submit with schema_version 2 and source {archive: {upload, manifest_sha256}}.",
      "Recommended layout (what the kiln CLI does; any layout meeting the rules is accepted): a file over 1 MiB gets parts of its own cut at fixed 4 MiB offsets of the file; smaller files are concatenated in path order into pack parts of at most 4 MiB, identical files sharing one segment, a pack ending after the first file at or past 1 MiB whose path's FNV-1a hash is divisible by 8 (so an edit moves no other pack's boundaries), or before a file that would take it past 4 MiB. Parts are content-addressed, so after an edit only the parts holding the changed file are sent again. A client that kept its previous upload's packs may instead point unchanged files into them and pack only the changed files, sending about the changed bytes; the kiln CLI does so while at most a quarter of the reused packs' bytes belong to no current file.",
    ].join(" "),
  },
);

export const SourceUpload = Closed(
  "SourceUpload",
  {
    upload: UploadId("The upload id (the reservation's idempotency key)."),
    tenant: Type.String({ description: "The tenant the upload is bound to." }),
    repository: RepositoryName("The repository the upload is bound to."),
    reserved_by: Type.String({ description: "Principal that reserved it: the original owner, kept on every retry." }),
    state: Type.Union(
      [Type.Literal("reserved"), Type.Literal("verified"), Type.Literal("rejected"), Type.Literal("expired")],
      {
        description:
          "reserved: accepting parts. verified: sources.complete checked every part and file digest; a job may claim it. rejected: completion found the parts cannot produce the manifest's files (see rejection); final. expired: expires_at passed while unclaimed; parts are refused `gone`.",
      },
    ),
    format_version: Type.Integer({ minimum: 1 }),
    manifest_sha256: Sha256Hex(
      "SHA-256 of the manifest's canonical form: for each entry in manifest order, UTF-8 lines `file<TAB><0|1 executable><TAB><size><TAB><sha256><TAB><path><LF>` or `symlink<TAB><target><TAB><path><LF>`. It names the tree's content, not its part layout; SourceReference repeats it.",
    ),
    totals: SourceTotals,
    reserved_at: Timestamp(),
    expires_at: Timestamp("One hour after reservation; an unclaimed upload expires then."),
    verified_at: Nullable(Timestamp(), "When completion verified it; null until then."),
    completed_by: Nullable(Type.String(), "Principal whose sources.complete verified it; null until then."),
    parts_received: Type.Integer({ minimum: 0, description: "Parts held for this upload (sent or reused)." }),
    bytes_received: ByteCount("Bytes of the parts held."),
    missing_parts: Type.Array(
      Type.Object(
        {
          first: PartNumber(),
          last: PartNumber(),
        },
        { additionalProperties: false },
      ),
      {
        description:
          "Inclusive ranges of part numbers not yet held, ascending; empty once all are held. Parts the tenant already held when the upload was reserved are held from the start.",
      },
    ),
    rejection: Nullable(
      Type.Object(
        {
          path: Nullable(Type.String(), "The entry that failed, where one did."),
          detail: Type.String({ description: "What did not verify." }),
        },
        { additionalProperties: false },
      ),
      "Why completion rejected the upload; null unless state is rejected.",
    ),
    admission: Type.Object(
      {
        claimed: Type.Boolean({ description: "Whether a job submission has claimed the verified upload." }),
        job: Nullable(Type.String(), "The job that claimed it; null while unclaimed."),
        claimed_at: Nullable(Timestamp(), "When it was claimed; null while unclaimed."),
      },
      {
        additionalProperties: false,
        description:
          "Retained admission state. One submission claims a verified upload (its replay returns the same job); the claimed source is kept with the job, and any other submission naming it is refused conflict.",
      },
    ),
    counts_toward_reservation: Type.Boolean({
      description:
        "Whether its part bytes still count toward the tenant's reservations: true while unclaimed, and after expiry until cleanup completes.",
    }),
  },
  { description: "A source upload and where it stands. Reads return the upload bound to its original tenant." },
);

export const SourceChunkStatus = Closed(
  "SourceChunkStatus",
  {
    upload: UploadId(),
    part: PartNumber(),
    sha256: Sha256Hex("The digest asked about; equal to the manifest's digest for the part."),
    present: Type.Boolean({
      description:
        "true when this upload holds the part: it was sent, or the service already stored bytes with this SHA-256 for the tenant and attached them to the upload. false: send it with sources.chunk.put.",
    }),
    origin: Nullable(
      Type.Union([Type.Literal("uploaded"), Type.Literal("reused")]),
      "uploaded or reused; null when absent.",
    ),
    bytes: Nullable(ByteCount("Length of the held part."), "Length of the held part; null when absent."),
  },
  { description: "Whether the service holds one part of an upload." },
);

export const SourceReference = Closed(
  "SourceReference",
  {
    upload: UploadId("A verified upload of the same tenant and repository."),
    manifest_sha256: Sha256Hex("The upload's manifest_sha256; a mismatch is refused conflict."),
  },
  { description: "Names a verified streamed archive as a job's source." },
);
