import { createHash } from "node:crypto";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import {
  annotateQueuedJob,
  type Db,
  findJobBySubmissionKey,
  insertJob,
  type JobRow,
  listJobs,
  newJobId,
  readJob,
  readJobDocument,
  readJobRecords,
  requestCancellation,
} from "@kiln/storage";
import { admissionSourceOf, pinnedToolchainOf } from "../../../domain/jobs/admission-source.js";
import { admitArchiveSource } from "../../../domain/jobs/admit-archive-source.js";
import { admitInlineSource, jobClassOf } from "../../../domain/jobs/admit-inline-source.js";
import { admitOfferedPlacement, type ToolchainOrigin } from "../../../domain/jobs/admit-offered-placement.js";
import { admitSettings } from "../../../domain/jobs/admit-settings.js";
import { insertAdmittedJob } from "../../../domain/jobs/admitted-source.js";
import { decideNetworkPolicy } from "../../../domain/jobs/decide-network-policy.js";
import { jobView } from "../../../domain/jobs/job-view.js";
import { storedJson } from "../../../domain/jobs/stored-json.js";
import { MAX_ATTEMPTS } from "../../../domain/policy/platform-limits.js";
import { Refusal, refuse } from "../../../domain/refusal.js";
import { requireOnboarded } from "../../../domain/repositories/require-onboarded.js";
import { requireActiveInstallation } from "../../../domain/source-hosting/require-active-installation.js";
import { admitTenantPolicy } from "../../../domain/tenants/admit-tenant-policy.js";
import { type PreparedSubmission, preparedBody } from "../../http/body-preparations.js";
import { type Handler, principalOf } from "../../http/handler.js";
import { tomlParserOf } from "../../http/toml-parser-of.js";
import { pageRequestOf } from "./page-request.js";

/**
 * jobs.submit: admits a captured Cargo workspace. The idempotency key is the durable
 * submission identity: an equal retry returns the original job whatever time passed;
 * changed input under the key is conflict.
 */
export const submitJob: Handler<"jobs.submit"> = async (ctx) => {
  const principal = principalOf(ctx);
  const key = ctx.idempotencyKey;
  // The body's identity and its inline bytes, prepared off the event loop for a large body.
  const prepared = preparedBody(ctx, "jobs.submit");
  const requestHash = prepared.requestHash;
  const existing = await findJobBySubmissionKey(ctx.db, { tenantId: principal.tenantId, key });
  if (existing !== undefined) return replayOrConflict(existing, requestHash, key);
  try {
    return await admitAndInsert(ctx, key, prepared);
  } catch (error) {
    // Another submission under the same key may have been accepted between this one's look-up
    // and its refusal — its bytes now count against the bandwidth allowance, its upload is now
    // claimed — so the refusal would answer a request whose job exists. The key's job is the
    // answer then (replayed, or conflict if the input differs), as it is for a later retry.
    if (error instanceof Refusal) {
      const raced = await findJobBySubmissionKey(ctx.db, { tenantId: principal.tenantId, key });
      if (raced !== undefined) return replayOrConflict(raced, requestHash, key);
    }
    throw error;
  }
};

/** jobs.submit's admission and insert, once no job holds the key yet. */
async function admitAndInsert(
  ctx: Parameters<Handler<"jobs.submit">>[0],
  key: string,
  prepared: PreparedSubmission,
): Promise<string> {
  const principal = principalOf(ctx);
  const body = ctx.body;
  const requestHash = prepared.requestHash;
  const source = body.workspace.source;
  const files = "files" in source ? source.files : null;
  if ((body.schema_version === 1) !== (files !== null)) {
    refuse("invalid_request", "body.schema_version must be 1 with inline files and 2 with an archive reference");
  }
  const tenantPolicy = await admitTenantPolicy(ctx.db, principal, { size: body.size, bodySize: true });
  await requireOnboarded(ctx.db, principal.tenantId, body.repository);
  await requireActiveInstallation(ctx.db, principal.tenantId, body.repository);
  const invocation = body.workspace.invocation;
  const admitted =
    "archive" in source
      ? await admitArchiveSource(ctx.deps, {
          tenantId: principal.tenantId,
          repository: body.repository,
          archive: source.archive,
          invocation,
          now: ctx.now,
        })
      : await admitInlineSource(
          { db: ctx.db, blobs: ctx.deps.blobs },
          {
            tenantId: principal.tenantId,
            ...inlineFilesOf(source.files, prepared),
            invocation,
            bandwidthAllowance: tenantPolicy.bandwidthBytesPerMonth,
            now: ctx.now,
          },
        );
  // The Cargo files admission reads: bounded (the admit functions refused larger ones), each
  // parsed once, on a body worker (a large one holds a thread for up to a second).
  const manifest = admitted.manifest;
  const admission = admissionSourceOf(
    manifest,
    ctx.deps.blobs,
    tomlParserOf(ctx.deps.largeBodies?.pool ?? null, principal.tenantId),
  );
  const workingDirectory = invocation.working_directory ?? ".";
  const settings = await admitSettings(ctx.db, {
    tenantId: principal.tenantId,
    repository: body.repository,
    size: body.size,
    tenantWallClockCeilingSeconds: tenantPolicy.wallClockCeilingSeconds,
    platformWallClockSeconds: ctx.deps.wallClockSeconds,
    invocation,
    workingDirectory,
    toml: admission.toml,
  });
  const network = await decideNetworkPolicy({ source: admission, workingDirectory });
  const pinned = await pinnedToolchainOf(admission, workingDirectory);
  const toolchain = invocation.toolchain ?? pinned ?? "stable";
  const origin =
    invocation.toolchain !== undefined ? "invocation" : pinned !== null ? "rust-toolchain-file" : "host-default";
  await admitOfferedPlacement(ctx.db, { size: body.size, toolchain, origin });
  const now = ctx.now.toISOString();
  const { job, created } = await insertAdmittedJob(ctx.db, {
    source: admitted,
    now: ctx.now,
    onCreated: annotateIfHeld(ctx.deps.storage.capabilities.rowLocks),
    row: {
      id: newJobId(ctx.now),
      tenant_id: principal.tenantId,
      repository: body.repository,
      branch: body.workspace.branch,
      base_commit: body.workspace.base_commit,
      head_sha: body.check?.head_sha ?? null,
      size: body.size,
      class: jobClassOf(invocation.operation, invocation.arguments, toolchain),
      description: ["cargo", invocation.operation, ...invocation.arguments].join(" "),
      status: "queued",
      submitted_by: principal.principal,
      submission_key: key,
      request_hash: requestHash,
      invocation: JSON.stringify(invocation),
      source_manifest: JSON.stringify(manifest),
      wall_clock_seconds: settings.wall_clock_ceiling.seconds,
      max_attempts: MAX_ATTEMPTS,
      attempts_started: 0,
      accepted_at: now,
      queued_at: now,
      admitted: JSON.stringify({
        toolchain,
        toolchain_origin: origin,
        network_policy: network.policy,
        network_policy_reason: network.reason,
        configuration_sha256: null,
        ...settings,
      }),
      retry_of: null,
    },
  });
  if (!created) return replayOrConflict(job, requestHash, key);
  ctx.afterCommit(() => ctx.deps.wakeScheduler?.());
  return job.id;
}

/** The inline files as bytes (the body's arrays are not read: the preparation decoded them). */
function inlineFilesOf(files: readonly { path: string; executable: boolean }[], prepared: PreparedSubmission) {
  const inline = prepared.inline;
  if (inline === null) throw new Error("an inline source's preparation has no inline files");
  return {
    files: files.map((file, index) => ({
      path: file.path,
      executable: file.executable,
      bytes: inline.bytes[index] ?? new Uint8Array(),
      sha256: inline.sha256[index] ?? "",
    })),
    rules: inline.rules,
  };
}

/**
 * A new queued job's onCreated: the annotation of why it waits when its tenant is held now
 * (storage annotateQueuedJob), written in its insert transaction.
 */
function annotateIfHeld(rowLocks: boolean) {
  return (trx: Db, job: JobRow) => annotateQueuedJob(trx, { tenantId: job.tenant_id, jobId: job.id, rowLocks });
}

function replayOrConflict(job: Pick<JobRow, "id" | "request_hash">, requestHash: string, key: string): string {
  if (job.request_hash !== requestHash) {
    refuse("conflict", `idempotency-key ${key} already submitted job ${job.id} with different input`);
  }
  return job.id;
}

export const getJob: Handler<"jobs.get"> = async (ctx) => {
  const record = await readJobDocument(ctx.db, { tenantId: principalOf(ctx).tenantId, jobId: ctx.params.id });
  if (record === undefined) return refuse("not_found", `no job ${ctx.params.id}`);
  return jobView(record);
};

export const listTenantJobs: Handler<"jobs.list"> = async (ctx) => {
  const q = ctx.query;
  const page = await listJobs(ctx.db, {
    tenantId: principalOf(ctx).tenantId,
    filters: {
      ...(q.repository === undefined ? {} : { repository: q.repository }),
      ...(q.branch === undefined ? {} : { branch: q.branch }),
      ...(q.status === undefined ? {} : { status: q.status }),
      ...(q.class === undefined ? {} : { class: q.class }),
    },
    ...pageRequestOf(ctx.query),
  });
  const jobs = (await readJobRecords(ctx.db, page.rows)).map(jobView);
  const s = page.summary;
  return {
    jobs,
    total: page.total,
    summary: {
      queued: s.queued ?? 0,
      running: (s.running ?? 0) + (s.cancellation_requested ?? 0),
      passed: s.passed ?? 0,
      failed: (s.failed ?? 0) + (s.cancelled ?? 0),
    },
    next_cursor: page.nextCursor,
  };
};

export const cancelJob: Handler<"jobs.cancel"> = async (ctx) => {
  const principal = principalOf(ctx);
  const id = ctx.params.id;
  const result = await requestCancellation(ctx.db, {
    tenantId: principal.tenantId,
    jobId: id,
    by: principal.principal,
    now: ctx.now,
  });
  if (result.kind === "not_found") return refuse("not_found", `no job ${id}`);
  if (result.kind === "terminal")
    return refuse("conflict", `job ${id} is ${result.status}; only a queued or running job can be cancelled`);
  ctx.afterCommit(() => ctx.deps.wakeScheduler?.());
  return { job: id, state: "cancellation_requested", requested_by: principal.principal };
};

/** jobs.retry: a terminal job → a fresh linked job with the same source and invocation. */
export const retryJob: Handler<"jobs.retry"> = async (ctx) => {
  const principal = principalOf(ctx);
  const id = ctx.params.id;
  const record = await readJob(ctx.db, { tenantId: principal.tenantId, jobId: id });
  if (record === undefined) return refuse("not_found", `no job ${id}`);
  const original = record.job;
  if (!TERMINAL_JOB_STATUSES.has(original.status)) {
    return refuse("conflict", `job ${id} is ${original.status}; only a terminal job can be retried`);
  }
  await admitTenantPolicy(ctx.db, principal, { size: original.size, bodySize: false });
  await requireActiveInstallation(ctx.db, principal.tenantId, original.repository);
  // What submission checked that the hosts can have changed since: the size still placeable, the
  // toolchain still installed somewhere.
  const admitted = storedJson<{ toolchain?: string; toolchain_origin?: ToolchainOrigin }>(original.admitted);
  await admitOfferedPlacement(
    ctx.db,
    {
      size: original.size,
      toolchain: admitted?.toolchain ?? null,
      origin: admitted?.toolchain_origin ?? "host-default",
    },
    original.id,
  );
  const now = ctx.now.toISOString();
  const { job } = await insertJob(
    ctx.db,
    {
      ...original,
      id: newJobId(ctx.now),
      status: "queued",
      submitted_by: principal.principal,
      submission_key: null,
      request_hash: createHash("sha256").update(`retry:${original.id}:${ctx.idempotencyKey}`).digest("hex"),
      attempts_started: 0,
      accepted_at: now,
      queued_at: now,
      started_at: null,
      finished_at: null,
      failure: null,
      queue_annotation: null,
      retry_of: original.id,
      // The same source: the database copies the original's manifest (it never passes through here).
      source_manifest: { copiedFrom: original.id },
      cancel_requested_at: null,
      cancel_requested_by: null,
      usage: null,
      settlement: null,
    },
    annotateIfHeld(ctx.deps.storage.capabilities.rowLocks),
  );
  ctx.afterCommit(() => ctx.deps.wakeScheduler?.());
  return { original: original.id, retry: job.id, submitted_by: principal.principal };
};
