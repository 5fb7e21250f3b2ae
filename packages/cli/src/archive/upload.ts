import { setTimeout as sleep } from "node:timers/promises";
import { type KilnClient, KilnRefusal, KilnTransportError, type OutputOf } from "@kiln/client";
import { type Archive, FORMAT_VERSION, PART_BYTES, readPart, uploadIdOf } from "./layout.js";

export interface UploadSummary {
  upload: string;
  /** The upload id's generation (uploadIdOf): which upload of these bytes this is. */
  generation: number;
  manifest_sha256: string;
  parts_total: number;
  /** Parts sent with sources.chunk.put in this run. */
  parts_sent: number;
  /** Parts the service already held for the upload, or attached from the tenant's store on chunk.check. */
  parts_reused: number;
  bytes_sent: number;
  bytes_total: number;
  seconds: number;
}

export interface UploadOptions {
  readonly repository: string;
  readonly archive: Archive;
  /** Parallel chunk requests (default 4). */
  readonly concurrency?: number;
  /** Called after every part held: bytes sent so far out of the bytes this run has to send at most. */
  readonly onProgress?: (sent: number, toSend: number) => void;
  /** The generation to try first (default 0); the ones before it were claimed by earlier jobs. */
  readonly firstGeneration?: number;
  /** Called with the reserved upload before any part is sent. */
  readonly onReserved?: (upload: string, missingParts: number) => void;
  /** sources.capabilities for the repository when the caller already asked (before hashing the tree). */
  readonly capabilities?: SourceCapabilities;
}

/** What the service accepts (sources.capabilities). */
export type SourceCapabilities = OutputOf<"sources.capabilities">;

/** The upload could not be finished: the message names why. */
export class UploadError extends Error {
  override name = "UploadError";
}

/** A source upload and where it stands (SourceUpload: what sources.reserve and sources.complete return). */
type SourceUpload = OutputOf<"sources.reserve">;

const MAX_GENERATIONS = 64;

/**
 * The service lacks a part of a reused pack that also holds bytes of files no longer in the
 * tree, so it cannot be sent again: the caller lays the tree out afresh (upload-workspace.ts).
 */
export class StaleLayoutError extends UploadError {
  override name = "StaleLayoutError";
}

/** Refusals worth another try after a pause: the service asked for one, or a repeat is in flight. */
const TRANSIENT = new Set(["unavailable", "rate_limited", "idempotency_key_in_flight"]);

/**
 * Runs a chunk request, trying again (up to 5 times, backing off) after a transport failure or
 * a transient refusal; chunk requests are safe to repeat (a repeated part with the same bytes
 * verifies the original).
 */
async function withRetries<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      const transient =
        error instanceof KilnTransportError || (error instanceof KilnRefusal && TRANSIENT.has(error.code));
      if (!transient || attempt >= 5) throw error;
      const asked = error instanceof KilnRefusal ? error.refusal.retry_after_seconds : undefined;
      await sleep(typeof asked === "number" ? Math.min(asked, 30) * 1000 : 250 * 2 ** attempt);
    }
  }
}

/**
 * Reserves the archive's upload (or resumes it: the upload id derives from the manifest and its
 * layout; the reservation attaches every part the tenant already holds), sends the parts it
 * still lists as missing with bounded concurrency, and completes it. An upload of the same bytes already
 * claimed by a job, rejected or expired moves to the next generation of the id.
 */
export async function uploadArchive(client: KilnClient, options: UploadOptions): Promise<UploadSummary> {
  const started = Date.now();
  const { repository, archive } = options;
  const capabilities = options.capabilities ?? (await client.call("sources.capabilities", { query: { repository } }));
  if (capabilities.max_chunk_bytes < PART_BYTES) {
    throw new UploadError(`the service takes parts of at most ${capabilities.max_chunk_bytes} bytes; kiln cuts 4 MiB`);
  }
  if (!capabilities.format_versions.includes(FORMAT_VERSION)) {
    throw new UploadError(`the service does not accept manifest format ${FORMAT_VERSION}`);
  }
  const body = {
    repository,
    format_version: FORMAT_VERSION,
    totals: archive.totals,
    manifest: archive.manifest,
  };
  let reserved: SourceUpload | undefined;
  let generation = options.firstGeneration ?? 0;
  for (const last = generation + MAX_GENERATIONS; generation < last; generation++) {
    const id = uploadIdOf(repository, archive, generation);
    let upload: SourceUpload;
    try {
      upload = await client.call("sources.reserve", { body, idempotencyKey: id });
    } catch (error) {
      if (error instanceof KilnRefusal && error.code === "gone") continue;
      throw error;
    }
    if (upload.admission.claimed || upload.state === "rejected" || upload.state === "expired") continue;
    reserved = upload;
    break;
  }
  if (reserved === undefined) throw new UploadError(`no fresh upload id after ${MAX_GENERATIONS} generations`);
  const upload = reserved.upload;

  const missing = new Set<number>();
  for (const range of reserved.missing_parts) for (let p = range.first; p <= range.last; p++) missing.add(p);
  const todo = archive.sources.filter((s) => missing.has(s.part));
  const lost = todo.filter((s) => !s.reproducible);
  if (lost.length > 0) {
    throw new StaleLayoutError(
      `the service does not hold ${lost.length} reused pack(s) of the previous layout (first: part ${lost[0]?.part}); they cannot be sent again`,
    );
  }
  const toSend = todo.reduce((sum, s) => sum + s.bytes, 0);
  options.onReserved?.(upload, todo.length);
  let partsSent = 0;
  let bytesSent = 0;
  const partsReused = archive.sources.length - todo.length;
  let next = 0;
  const worker = async () => {
    while (next < todo.length) {
      const source = todo[next++];
      if (source === undefined) break;
      // No sources.chunk.check first: the reservation already attached every part the tenant
      // holds (its missing_parts leave them out), so asking again would only double the
      // requests of a fresh upload.
      const bytes = readPart(source);
      await withRetries(() =>
        client.call("sources.chunk.put", {
          params: { upload, part: source.part },
          query: { repository },
          body: bytes,
          idempotencyKey: upload,
        }),
      );
      partsSent += 1;
      bytesSent += source.bytes;
      options.onProgress?.(bytesSent, toSend);
    }
  };
  const concurrency = Math.max(1, options.concurrency ?? 4);
  await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(1, todo.length)) }, worker));

  const completed = await client.call("sources.complete", {
    params: { upload },
    query: { repository },
    idempotencyKey: upload,
  });
  if (completed.state !== "verified") {
    const why = completed.rejection;
    throw new UploadError(
      `the service ${completed.state} upload ${upload}${
        why === null ? "" : `: ${why.path === null ? "" : `${why.path}: `}${why.detail}`
      } (did the workspace change while it was uploaded? run again)`,
    );
  }
  return {
    upload,
    generation,
    manifest_sha256: archive.manifestSha256,
    parts_total: archive.sources.length,
    parts_sent: partsSent,
    parts_reused: partsReused,
    bytes_sent: bytesSent,
    bytes_total: archive.totals.part_bytes,
    seconds: (Date.now() - started) / 1000,
  };
}
