import { SOURCE_LIMITS, UPLOAD_ID_PATTERN } from "@kiln/contract";
import {
  completeUpload,
  findTenantChunk,
  readUpload,
  readUploadForPart,
  readUploadParts,
  recordUploadPart,
  reserveUpload,
  type SourceUploadHeader,
  type SourceUploadPartRow,
  type Storage,
  tenantReservations,
} from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import { valueOrRefusal } from "../../../domain/refusal-outcome.js";
import { requireOnboarded } from "../../../domain/repositories/require-onboarded.js";
import { DeclaredPartsCache } from "../../../domain/sources/declared-parts.js";
import { readSourceManifest } from "../../../domain/sources/read-source-manifest.js";
import { SegmentDigests } from "../../../domain/sources/segment-digests.js";
import { describeRanges, isExpired, missingRanges, uploadView } from "../../../domain/sources/upload-view.js";
import { verifyUpload } from "../../../domain/sources/verify-upload.js";
import { readBandwidthAllowance, refuseOverBandwidth } from "../../../domain/tenants/bandwidth-allowance.js";
import { preparedBody } from "../../http/body-preparations.js";
import { type BaseContext, type Handler, principalOf } from "../../http/handler.js";
import { ReceivedBytes } from "../../http/received-bytes.js";

/** What the sources helpers read of a request: the caller, the path's upload (and part), the repository query, the key. */
type UploadContext = BaseContext & {
  readonly idempotencyKey: string | null;
  readonly params: { readonly upload: string; readonly part?: number };
  readonly query: { readonly repository: string };
};

const UPLOAD_ID = new RegExp(UPLOAD_ID_PATTERN);

/** The upload id a mutation's idempotency-key names. */
function uploadKeyOf(ctx: BaseContext & { readonly idempotencyKey: string }): string {
  const key = ctx.idempotencyKey;
  if (!UPLOAD_ID.test(key)) {
    refuse(
      "invalid_request",
      "the idempotency-key is the upload id: 1 to 128 ASCII letters, digits, `-`, `_`, `.`, `:`",
    );
  }
  return key;
}

/** For chunk.put and complete: the key must be the path's upload id (a chunk's is bound to its part too). */
function requireKeyIsPathUpload(ctx: UploadContext): string {
  const key = ctx.idempotencyKey ?? refuse("idempotency_key_required", `${ctx.op.id} needs an idempotency-key`);
  const upload = ctx.params.upload;
  if (key !== upload) {
    const part = ctx.params.part === undefined ? "" : ` (its part ${String(ctx.params.part)})`;
    refuse(
      "invalid_request",
      `idempotency-key ${JSON.stringify(key)} must equal the path's upload id ${JSON.stringify(upload)}${part}`,
    );
  }
  return upload;
}

interface Loaded {
  readonly upload: SourceUploadHeader;
  readonly parts: SourceUploadPartRow[];
}

/**
 * The upload named by the path, bound to the caller's tenant and the `repository` query:
 * another tenant's upload, or one of another repository, is not_found.
 */
async function loadUpload(ctx: UploadContext): Promise<Loaded> {
  const tenantId = principalOf(ctx).tenantId;
  const id = ctx.params.upload;
  const repository = ctx.query.repository;
  const found = await readUpload(ctx.deps.storage, { tenantId, upload: id });
  if (found === undefined || found.upload.repository !== repository) {
    return refuse("not_found", `no upload ${id} of ${repository} for this tenant`);
  }
  return found;
}

function refuseIfExpired(ctx: BaseContext, upload: SourceUploadHeader): void {
  if (isExpired(upload, ctx.now)) {
    refuse("gone", `upload ${upload.upload} expired at ${upload.expires_at} unclaimed; reserve a new upload`, {
      expired_at: upload.expires_at,
    });
  }
}

/** The upload's manifest, or not_found if the upload went meanwhile. */
async function manifestOf(storage: Storage, upload: SourceUploadHeader) {
  return (await readSourceManifest(storage, upload)) ?? refuse("not_found", `no upload ${upload.upload}`);
}

/** One process's parsed manifests (see declared-parts.ts). */
const declaredParts = new DeclaredPartsCache();

/**
 * The upload a chunk request names (bound to the caller's tenant and the `repository` query, as
 * loadUpload) with the part it names if held — without reading the manifest or the other parts.
 */
async function loadUploadForPart(ctx: UploadContext, part: number) {
  const tenantId = principalOf(ctx).tenantId;
  const id = ctx.params.upload;
  const repository = ctx.query.repository;
  const found = await readUploadForPart(ctx.deps.storage, { tenantId, upload: id, part });
  if (found === undefined || found.upload.repository !== repository) {
    return refuse("not_found", `no upload ${id} of ${repository} for this tenant`);
  }
  return found;
}

/** Digests of packed files, taken at chunk.put for sources.complete (see segment-digests.ts). */
const segmentDigests = new SegmentDigests();

/** The part the manifest declares under this number, with the packed files it holds. */
async function declaredPart(ctx: BaseContext, upload: SourceUploadHeader, part: number) {
  const manifest = await declaredParts.partsOf(ctx.deps.storage, upload);
  const declared = manifest.parts[part - 1];
  if (declared === undefined) {
    return refuse(
      "invalid_request",
      `path.part ${part} is not a part of upload ${upload.upload} (its manifest declares ${upload.part_count})`,
    );
  }
  return { ...declared, slices: manifest.slices.get(part) };
}

export const sourceCapabilities: Handler<"sources.capabilities"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  const repository = ctx.query.repository;
  await requireOnboarded(ctx.db, tenantId, repository);
  const current = await tenantReservations(ctx.deps.storage, tenantId);
  return {
    repository,
    format_versions: [...SOURCE_LIMITS.formatVersions],
    digest_algorithm: "sha256",
    max_chunk_bytes: SOURCE_LIMITS.maxChunkBytes,
    max_parts: SOURCE_LIMITS.maxParts,
    upload_lifetime_seconds: SOURCE_LIMITS.uploadLifetimeSeconds,
    limits: {
      file_bytes: SOURCE_LIMITS.maxFileBytes,
      entries: SOURCE_LIMITS.maxEntries,
      directories: SOURCE_LIMITS.maxDirectories,
      metadata_bytes: SOURCE_LIMITS.maxMetadataBytes,
      path_bytes: SOURCE_LIMITS.maxPathBytes,
    },
    tenant_reservations: {
      max_bytes: SOURCE_LIMITS.tenantReservationBytes,
      max_unclaimed_uploads: SOURCE_LIMITS.tenantUnclaimedUploads,
      reserved_bytes: current.reservedBytes,
      unclaimed_uploads: current.unclaimedUploads,
    },
  };
};

/**
 * sources.reserve: the key is the upload id and the upload's durable identity. An equal
 * repeat returns the original upload; changed input under the key is conflict; a key naming an
 * expired upload is gone.
 */
export const reserveSource: Handler<"sources.reserve"> = async (ctx) => {
  const principal = principalOf(ctx);
  const id = uploadKeyOf(ctx);
  const body = ctx.body;
  // Validated before the key is looked up: the reservation's identity comes out of that pass
  // (made off the event loop for a large body: body-preparations.ts).
  const prepared = preparedBody(ctx, "sources.reserve");
  const validated = valueOrRefusal(prepared.validated);
  const requestHash = validated.reservationSha256;
  const replay = (found: SourceUploadHeader) => {
    if (found.request_hash !== requestHash) {
      refuse("conflict", `upload ${id} was already reserved with a different reservation`);
    }
    refuseIfExpired(ctx, found);
    return found;
  };
  const existing = await readUpload(ctx.deps.storage, { tenantId: principal.tenantId, upload: id });
  if (existing !== undefined) return uploadView(replay(existing.upload), existing.parts, ctx.now);

  await requireOnboarded(ctx.db, principal.tenantId, body.repository);
  // A new reservation once the month's bandwidth is used up is refused before anything is reserved.
  await refuseOverBandwidth(ctx.deps.storage, {
    tenantId: principal.tenantId,
    allowance: await readBandwidthAllowance(ctx.deps.storage, principal.tenantId),
    incomingBytes: 0,
    now: ctx.now,
    operation: "sources.reserve",
  });
  const result = await reserveUpload(ctx.deps.storage, {
    tenantId: principal.tenantId,
    upload: id,
    repository: body.repository,
    reservedBy: principal.principal,
    requestHash,
    formatVersion: body.format_version,
    manifestDeflated: prepared.manifestDeflated,
    manifestSha256: validated.manifestSha256,
    totals: JSON.stringify(body.totals),
    partCount: validated.totals.parts,
    partBytes: validated.totals.part_bytes,
    now: ctx.now,
    expiresAt: new Date(ctx.now.getTime() + SOURCE_LIMITS.uploadLifetimeSeconds * 1000),
    maxBytes: SOURCE_LIMITS.tenantReservationBytes,
    maxUnclaimedUploads: SOURCE_LIMITS.tenantUnclaimedUploads,
    // What the tenant already holds is attached with the reservation, so missing_parts lists only what to send.
    attachHeld: body.manifest.parts,
  });
  if (result.kind === "over_limit") {
    return refuse(
      "conflict",
      result.limit === "uploads"
        ? `the tenant already has ${result.unclaimedUploads} unclaimed uploads (at most ${SOURCE_LIMITS.tenantUnclaimedUploads}, expired ones counting until cleanup); complete and submit or let them expire`
        : `reserving ${validated.totals.part_bytes} part bytes would pass the tenant's reservations: ${result.reservedBytes} of ${SOURCE_LIMITS.tenantReservationBytes} bytes already reserved (expired uploads counting until cleanup)`,
    );
  }
  const partsOf = () => readUploadParts(ctx.deps.storage, { tenantId: principal.tenantId, upload: id });
  if (result.kind === "existing") return uploadView(replay(result.upload), await partsOf(), ctx.now);
  return uploadView(result.upload, await partsOf(), ctx.now);
};

export const sourceStatus: Handler<"sources.status"> = async (ctx) => {
  const { upload, parts } = await loadUpload(ctx);
  return uploadView(upload, parts, ctx.now);
};

/**
 * sources.chunk.put: a part's bytes, checked against the manifest's length and digest. A
 * repeat with the same bytes verifies the held part (even once completed); changed bytes are
 * conflict; an upload no longer reserved is conflict; an expired one gone (held part or not).
 */
export const putSourceChunk: Handler<"sources.chunk.put"> = async (ctx) => {
  const principal = principalOf(ctx);
  requireKeyIsPathUpload(ctx);
  const part = Number(ctx.params.part);
  const { upload, part: held } = await loadUploadForPart(ctx, part);
  // Streamed to the blob store's staging directory and hashed as it arrived (web/http/received-bytes.ts):
  // stored below once checked, its staging file removed when the response is done either way.
  const received: unknown = ctx.body;
  if (!(received instanceof ReceivedBytes))
    return refuse("invalid_request", "body must be the part's raw bytes (application/octet-stream)");
  refuseIfExpired(ctx, upload);
  const got = received.sha256;
  if (held !== undefined) {
    if (held.sha256 !== got) {
      refuse(
        "conflict",
        `upload ${upload.upload} already holds part ${part} (sha256 ${held.sha256}); these bytes differ (sha256 ${got})`,
      );
    }
    return undefined;
  }
  const declared = await declaredPart(ctx, upload, part);
  if (upload.state !== "reserved") {
    refuse("conflict", `upload ${upload.upload} is ${upload.state}; it no longer accepts parts`);
  }
  if (received.bytes !== declared.bytes || got !== declared.sha256) {
    refuse(
      "invalid_request",
      `part ${part}: got ${received.bytes} bytes with sha256 ${got}; the manifest declares ${declared.bytes} bytes with sha256 ${declared.sha256}`,
    );
  }
  // Before the bytes are stored or recorded, so a part over the bandwidth allowance leaves nothing.
  await refuseOverBandwidth(ctx.deps.storage, {
    tenantId: principal.tenantId,
    allowance: await readBandwidthAllowance(ctx.deps.storage, principal.tenantId),
    incomingBytes: received.bytes,
    now: ctx.now,
    operation: "sources.chunk.put",
  });
  await received.store(ctx.deps.blobs);
  // The packed files' digests while the bytes are at hand: completion then skips them.
  if (declared.slices !== undefined) segmentDigests.remember(got, await received.read(), declared.slices);
  const recorded = await recordUploadPart(ctx.deps.storage, {
    tenantId: principal.tenantId,
    upload: upload.upload,
    part,
    sha256: got,
    bytes: received.bytes,
    origin: "uploaded",
    now: ctx.now,
  });
  if (recorded.kind === "not_reserved") {
    refuse("conflict", `upload ${upload.upload} is ${recorded.upload?.state ?? "gone"}; it no longer accepts parts`);
  }
  return undefined;
};

/**
 * sources.chunk.check: whether the upload holds a part. When it does not but the tenant's own
 * store holds bytes with the digest (never another tenant's), they are attached (origin
 * reused) and the answer is present.
 */
export const checkSourceChunk: Handler<"sources.chunk.check"> = async (ctx) => {
  const principal = principalOf(ctx);
  const part = Number(ctx.params.part);
  const sha256 = ctx.query.sha256;
  const { upload, part: held } = await loadUploadForPart(ctx, part);
  const declared = await declaredPart(ctx, upload, part);
  if (declared.sha256 !== sha256) {
    refuse(
      "conflict",
      `part ${part} of upload ${upload.upload} has sha256 ${declared.sha256} in its manifest, not ${sha256}`,
    );
  }
  refuseIfExpired(ctx, upload);
  const present = (origin: "uploaded" | "reused", bytes: number) => ({
    upload: upload.upload,
    part,
    sha256,
    present: true,
    origin,
    bytes,
  });
  if (held !== undefined) return present(held.origin, held.bytes);
  const absent = { upload: upload.upload, part, sha256, present: false, origin: null, bytes: null };
  if (upload.state !== "reserved") return absent;
  const owned = await findTenantChunk(ctx.deps.storage, { tenantId: principal.tenantId, sha256 });
  if (owned === undefined || owned.bytes !== declared.bytes || !(await ctx.deps.blobs.has(sha256))) return absent;
  const recorded = await recordUploadPart(ctx.deps.storage, {
    tenantId: principal.tenantId,
    upload: upload.upload,
    part,
    sha256,
    bytes: owned.bytes,
    origin: "reused",
    now: ctx.now,
  });
  if (recorded.kind === "not_reserved") return absent;
  return present(recorded.part.origin, recorded.part.bytes);
};

/**
 * sources.complete: every part held (else conflict naming the missing ones), then every file
 * verified and stored; the outcome is recorded once, and a repeat returns it with the
 * original completer.
 */
export const completeSource: Handler<"sources.complete"> = async (ctx) => {
  const principal = principalOf(ctx);
  requireKeyIsPathUpload(ctx);
  const { upload, parts } = await loadUpload(ctx);
  refuseIfExpired(ctx, upload);
  if (upload.state !== "reserved") return uploadView(upload, parts, ctx.now);
  const missing = missingRanges(upload.part_count, new Set(parts.map((p) => p.part)));
  if (missing.length > 0) {
    refuse(
      "conflict",
      `upload ${upload.upload} is missing parts ${describeRanges(missing)}; send them before completing`,
    );
  }
  const outcome = await verifyUpload(
    ctx.deps.blobs,
    await manifestOf(ctx.deps.storage, upload),
    new Map(parts.map((p) => [p.part, { sha256: p.sha256, bytes: Number(p.bytes) }])),
    segmentDigests,
  );
  const recorded = await completeUpload(ctx.deps.storage, {
    tenantId: principal.tenantId,
    upload: upload.upload,
    completedBy: principal.principal,
    now: ctx.now,
    outcome,
  });
  if (recorded === undefined) return refuse("not_found", `no upload ${upload.upload}`);
  return uploadView(recorded, parts, ctx.now);
};
