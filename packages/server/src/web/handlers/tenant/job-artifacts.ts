import { posix } from "node:path";
import { readJob } from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, principalOf } from "../../http/handler.js";
import { sendBlob } from "./job-evidence.js";

/** The stored instant (ISO-8601 text) has passed at `now`. */
const passed = (at: string, now: Date) => new Date(at).getTime() <= now.getTime();

/**
 * jobs.artifacts: the job's publications (one per attempt that published), each with its
 * files in publication order. expires_at is the latest expiry, null when nothing was
 * published. Retention is never extended: once every publication has expired the
 * inventory is gone; before that, only publications still served are listed.
 */
export const jobArtifacts: Handler<"jobs.artifacts"> = async (ctx) => {
  const id = ctx.params.id;
  const record = await readJob(ctx.db, { tenantId: principalOf(ctx).tenantId, jobId: id });
  if (record === undefined) return refuse("not_found", `no job ${id}`);
  // Fixed-width ISO-8601 text: sorting it orders it in time.
  const expiresAt = record.artifacts
    .map((a) => a.expires_at)
    .sort()
    .at(-1);
  if (expiresAt === undefined) return { expires_at: null, publications: [] };
  if (passed(expiresAt, ctx.now)) {
    return refuse("gone", `the artifacts of job ${id} expired at ${expiresAt}; retention is not extended`);
  }
  const publications = new Map<
    number,
    {
      attempt: number;
      published_at: string;
      expires_at: string;
      files: { index: number; path: string; bytes: number; sha256: string }[];
    }
  >();
  for (const a of record.artifacts) {
    if (passed(a.expires_at, ctx.now)) continue;
    let publication = publications.get(a.attempt);
    if (publication === undefined) {
      publication = { attempt: a.attempt, published_at: a.published_at, expires_at: a.expires_at, files: [] };
      publications.set(a.attempt, publication);
    }
    publication.files.push({ index: a.idx, path: a.path, bytes: a.bytes, sha256: a.sha256 });
  }
  return {
    expires_at: expiresAt,
    publications: [...publications.values()].sort((x, y) => x.attempt - y.attempt),
  };
};

/** `attachment; filename*=UTF-8''…` (RFC 6266/8187) naming the file's base name. */
function attachmentOf(path: string): string {
  const encoded = encodeURIComponent(posix.basename(path)).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename*=UTF-8''${encoded}`;
}

/** jobs.artifact_bytes: one published file's bytes, while its publication is retained. */
export const jobArtifactBytes: Handler<"jobs.artifact_bytes"> = async (ctx) => {
  const id = ctx.params.id;
  const attempt = Number(ctx.params.attempt);
  const index = Number(ctx.params.index);
  const record = await readJob(ctx.db, { tenantId: principalOf(ctx).tenantId, jobId: id });
  if (record === undefined) return refuse("not_found", `no job ${id}`);
  const file = record.artifacts.find((a) => a.attempt === attempt && a.idx === index);
  if (file === undefined) return refuse("not_found", `job ${id} published no artifact ${attempt}/${index}`);
  if (passed(file.expires_at, ctx.now)) {
    return refuse("gone", `artifact ${attempt}/${index} of job ${id} expired at ${file.expires_at}`);
  }
  const sent = await sendBlob(ctx, file.sha256, { "content-disposition": attachmentOf(file.path) });
  // A retained publication whose bytes are missing is the store's fault, not the caller's.
  if (sent === undefined) throw new Error(`artifact blob ${file.sha256} of job ${id} is missing from the blob store`);
  return sent;
};
