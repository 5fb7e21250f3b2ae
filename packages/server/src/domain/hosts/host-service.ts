import {
  type AppendAnswer,
  type AttemptClaim,
  type AttemptClaimAnswer,
  type AttemptPlacement,
  type AttemptRef,
  AttemptResult,
  CLAIM_MAX_WAIT_MS,
  type Clock,
  type FinishAnswer,
  type HeartbeatAnswer,
  type HeldRegistryCredential,
  type HostEnrollment,
  type Logger,
  type LogLine,
  messageOf,
  type RegistryCredentialGrant,
} from "@kiln/contract";
import {
  acknowledgeRegistryCredentials,
  appendLogRecords,
  type BlobStore,
  claimNextJob,
  findLeasedAttempt,
  findLineageDrop,
  finishAttempt,
  type JobNotifications,
  readCurrentRegistryCredentials,
  readHostAdmission,
  readJobManifest,
  readTenantControls,
  recordLineageSave,
  registerHost,
  releaseUndeliveredAttempt,
  renewAttemptLease,
  type Storage,
  type UndeliveredRelease,
} from "@kiln/storage";
import { Value } from "@sinclair/typebox/value";
import { withFailureLogSequences } from "../jobs/failure-log-sequences.js";
import { HOST_FRESH_SECONDS } from "../platform/host-serving.js";
import { ARTIFACT_RETENTION_SECONDS, DISK_BYTES_OF_SIZE, VCPUS_OF_SIZE } from "../policy/platform-limits.js";
import { storageQuotaBytes } from "../repositories/storage-quota.js";
import type { SecretBox } from "../secrets/secret-box.js";
import { assemblePlacement, UnplaceableJobError } from "./assemble-placement.js";
import { LEASE_SECONDS } from "./attempt-lease.js";
import { ClaimWaits } from "./claim-waits.js";
import { HostFleetService } from "./fleet/host-fleet-service.js";
import { DEFAULT_LINEAGE_AFFINITY_SECONDS } from "./lineage-affinity.js";
import { lineageSeedsFor, seedContextOfJob } from "./lineage-seed-context.js";
import { meterAttempt } from "./meter-attempt.js";

/** What the host service reports besides its answers: jobs it could not place, reports it refused. */
export type HostServiceEvent =
  | { readonly type: "placement:unplaceable"; readonly jobId: string; readonly detail: string }
  | { readonly type: "report:invalid"; readonly jobId: string; readonly attempt: number; readonly detail: string }
  | { readonly type: "credentials:removed"; readonly hostId: string; readonly versions: number }
  /** A claim found nothing and waits (the long-poll) for a change that can make a job claimable. */
  | { readonly type: "claim:waiting"; readonly hostId: string }
  /**
   * A claim's answer: the attempt placed (or nothing and why), and whether it reached the host.
   * An undelivered placement was released (`release` says how).
   */
  | {
      readonly type: "claim:answered";
      readonly hostId: string;
      readonly jobId: string | null;
      readonly idle: AttemptClaimAnswer["idle"];
      readonly delivered: boolean;
      /** failed: the release itself failed (logged); the unrenewed lease lapses instead. */
      readonly release: UndeliveredRelease | "failed" | null;
    };

/**
 * How a binding answers one claim (HostService.answerClaim): `signal` aborts once the host is no
 * longer there to be answered (its connection closed), and `deliver` writes the answer, resolving
 * whether it was written whole (false: the host went away first).
 */
export interface ClaimExchange {
  readonly signal: AbortSignal;
  deliver(answer: AttemptClaimAnswer): Promise<boolean>;
}

export interface HostServiceDeps {
  readonly storage: Storage;
  readonly blobs: BlobStore;
  readonly clock: Clock;
  readonly log: Logger;
  readonly storageQuotaBytes?: number;
  /** How long a job waits for its lineage's host (default DEFAULT_LINEAGE_AFFINITY_SECONDS; 0 never waits). */
  readonly lineageAffinitySeconds?: number;
  /** Opens tenants' sealed registry credentials; without it no attempt receives any. */
  readonly secrets?: SecretBox;
  /**
   * What wakes a waiting claim (storage notifications); without it a waiting claim reads the
   * queue every CLAIM_FAST_POLL_MS.
   */
  readonly notifications?: JobNotifications;
  readonly onEvent?: (event: HostServiceEvent) => void;
}

/**
 * The control plane's side of the host protocol: placement assembly, lease renewal, fenced
 * log appends, metering, settlement and lineage accounting. Every binding of the protocol
 * (in-process for the embedded host, HTTP for a remote `kiln-host`) only moves its messages,
 * which are contract schemas; what a host reports is checked against them here.
 */
export class HostService {
  readonly #quotaBytes: number;
  /** The fleet messages: operator-started initializations and sandbox reports (hosts/fleet). */
  readonly fleet: HostFleetService;
  readonly #waits: ClaimWaits;

  constructor(private readonly deps: HostServiceDeps) {
    this.#quotaBytes = storageQuotaBytes(deps.storageQuotaBytes);
    this.fleet = new HostFleetService(deps);
    this.#waits = new ClaimWaits(deps);
  }

  /** Ends every waiting claim (answered `not_waiting`), and any later one at once: the binding is closing. */
  close(): void {
    this.#waits.close();
  }

  async enroll(host: HostEnrollment): Promise<void> {
    await registerHost(this.deps.storage, { ...host, now: this.deps.clock.now() });
  }

  /**
   * The next queued job that fits, as a leased attempt — preferring jobs whose lineage this host
   * holds, and leaving a job whose lineage another live host holds to that host for a bounded
   * time (claim-next-job.ts, placement by lineage). A job whose stored record cannot be
   * placed (it does not match its schema) fails at once with that cause, naming it, rather than
   * holding the head of the queue; the claim then goes on to the next job.
   */
  async claim(hostId: string, freeVcpus: number, freeDiskBytes?: number): Promise<AttemptPlacement | null> {
    for (;;) {
      const placed = await claimNextJob(this.deps.storage, {
        hostId,
        freeVcpus,
        vcpusOfSize: VCPUS_OF_SIZE,
        ...(freeDiskBytes === undefined ? {} : { freeDiskBytes, diskBytesOfSize: DISK_BYTES_OF_SIZE }),
        leaseSeconds: LEASE_SECONDS,
        now: this.deps.clock.now(),
        lineageAffinity: {
          waitSeconds: this.deps.lineageAffinitySeconds ?? DEFAULT_LINEAGE_AFFINITY_SECONDS,
          hostFreshSeconds: HOST_FRESH_SECONDS,
        },
      });
      if (placed === undefined) return null;
      const { job, attempt } = placed;
      try {
        const drop = await findLineageDrop(this.deps.storage, {
          tenantId: job.tenant_id,
          repository: job.repository,
          class: job.class,
        });
        const manifest = await readJobManifest(this.deps.storage, job.id);
        const seeds = await lineageSeedsFor(this.deps.storage, job, hostId);
        // The job is running now: the claim's transition notified its streams (storage notifications).
        return assemblePlacement(job, manifest, attempt, drop, seeds);
      } catch (error) {
        if (!(error instanceof UnplaceableJobError)) throw error;
        const detail = `job ${job.id} cannot be placed: ${error.message}`;
        this.deps.log.error({ jobId: job.id }, detail);
        this.deps.onEvent?.({ type: "placement:unplaceable", jobId: job.id, detail });
        await this.#settle(
          { jobId: job.id, attempt: attempt.number, leaseToken: attempt.lease_token },
          refusedResult({ phase: "provision", cause: "infrastructure", detail }),
        );
      }
    }
  }

  /**
   * A claim that may wait (the long-poll): answered at once when a job is claimable for the host,
   * else held — up to the host's `waitMs`, at most CLAIM_MAX_WAIT_MS on the control plane's clock
   * — until a change that can make one claimable (a job queued, a tenant's slot freed or controls
   * changed, a host's state changed: `onClaimable`) lets it take one, or the wait ends (`wait_ended`).
   * A host that is draining, or whose admission is closed, is answered `not_admitting` at once,
   * and a drain during the wait ends it so. Without notices (or while they are lost) the queue is
   * read every CLAIM_FAST_POLL_MS, and every CLAIM_RECHECK_MS with them, for what time alone
   * changes (a job's wait for its lineage's host ends).
   *
   * Cancellation: an attempt is placed only while the host is still there — `exchange.signal` is
   * checked before every claim, and a wait ends the moment it aborts. A placement whose answer
   * could not be written whole (the host left during the claim's own transaction, or while it was
   * being written) is released at once (releaseUndeliveredAttempt: the attempt removed, the job
   * queued again in its place, its attempt count unchanged), never left to a lapsed lease. What
   * no server can see — an answer written whole that the host then never reads — is the lease's
   * to settle: unrenewed, it lapses in LEASE_SECONDS and the reaper re-queues the job.
   */
  async answerClaim(request: AttemptClaim, exchange: ClaimExchange): Promise<AttemptClaimAnswer> {
    const answer = await this.#claimWaiting(request, exchange.signal);
    let delivered: boolean;
    try {
      delivered = await exchange.deliver(answer);
    } catch (error) {
      this.deps.log.warn({ hostId: request.hostId, err: error }, "a claim's answer could not be written");
      delivered = false;
    }
    let release: UndeliveredRelease | "failed" | null = null;
    if (!delivered && answer.placement !== null) {
      const { jobId, attempt, leaseToken } = answer.placement;
      try {
        release = await releaseUndeliveredAttempt(this.deps.storage, {
          jobId,
          attempt,
          leaseToken,
          now: this.deps.clock.now(),
          reason: `attempt ${attempt} placed on ${request.hostId} was released: the host's claim ended before the placement reached it`,
        });
        this.deps.log.warn(
          { hostId: request.hostId, jobId, attempt, release },
          `attempt ${attempt} of ${jobId} could not be handed to host ${request.hostId} (it left while claiming); released: ${release}`,
        );
      } catch (error) {
        release = "failed";
        this.deps.log.error(
          { hostId: request.hostId, jobId, attempt, err: error },
          `attempt ${attempt} of ${jobId} was not handed to host ${request.hostId} and could not be released (${messageOf(error)}); its lease lapses and the reaper re-queues the job`,
        );
      }
    }
    this.deps.onEvent?.({
      type: "claim:answered",
      hostId: request.hostId,
      jobId: answer.placement?.jobId ?? null,
      idle: answer.idle,
      delivered,
      release,
    });
    return answer;
  }

  async #claimWaiting(request: AttemptClaim, signal: AbortSignal): Promise<AttemptClaimAnswer> {
    const { hostId, freeVcpus, freeDiskBytes } = request;
    const waitMs = Math.min(request.waitMs ?? 0, CLAIM_MAX_WAIT_MS);
    const deadline = this.deps.clock.now().getTime() + waitMs;
    // Subscribed before the first read: a job queued after that read always wakes the wait.
    const waiter = waitMs > 0 ? await this.#waits.open() : null;
    try {
      for (;;) {
        if (signal.aborted || this.#waits.closed) return { placement: null, idle: "not_waiting" };
        waiter?.reset();
        const placement = await this.claim(hostId, freeVcpus, freeDiskBytes);
        if (placement !== null) return { placement, idle: null };
        const admission = await readHostAdmission(this.deps.storage, { hostId });
        if (!admission.admitting) return { placement: null, idle: "not_admitting" };
        if (waiter === null) return { placement: null, idle: "not_waiting" };
        const left = deadline - this.deps.clock.now().getTime();
        if (left <= 0) return { placement: null, idle: "wait_ended" };
        this.deps.onEvent?.({ type: "claim:waiting", hostId });
        await waiter.next(Math.min(left, waiter.pollMs()), signal);
      }
    } finally {
      waiter?.dispose();
    }
  }

  async heartbeat(ref: AttemptRef): Promise<HeartbeatAnswer> {
    const renewal = await renewAttemptLease(this.deps.storage, {
      ...ref,
      leaseSeconds: LEASE_SECONDS,
      now: this.deps.clock.now(),
    });
    if (renewal.kind === "stale") return "stale";
    return renewal.cancelRequested ? "cancel" : "continue";
  }

  async appendLogs(ref: AttemptRef, lines: readonly LogLine[]): Promise<AppendAnswer> {
    const accepted = await appendLogRecords(this.deps.storage, {
      ...ref,
      lines: lines.map((line) => ({ stream: line.stream, at: new Date(line.at), text: line.text })),
    });
    return accepted ? "accepted" : "stale";
  }

  fetchBlob(sha256: string): Promise<Buffer> {
    return this.deps.blobs.get(sha256);
  }

  putBlob(bytes: Uint8Array): Promise<{ sha256: string; bytes: number }> {
    return this.deps.blobs.put(bytes);
  }

  /**
   * The attempt's tenant's current registry credentials, opened for the host's dependency
   * gateway, only while the attempt holds its lease. A value that cannot be opened (sealed
   * under another master key) is left out and logged, never guessed.
   */
  async registryCredentials(ref: AttemptRef): Promise<RegistryCredentialGrant[]> {
    const leased = await findLeasedAttempt(this.deps.storage, ref);
    if (leased === undefined || this.deps.secrets === undefined) return [];
    const sealed = await readCurrentRegistryCredentials(this.deps.storage, { tenantId: leased.tenantId });
    const grants: RegistryCredentialGrant[] = [];
    for (const credential of sealed) {
      try {
        grants.push({
          registry: credential.registry,
          version: credential.version,
          authorization: this.deps.secrets.open(credential.ciphertext),
        });
      } catch {
        this.deps.log.error(
          { tenantId: leased.tenantId, registry: credential.registry, version: credential.version },
          "a registry credential cannot be opened with this master key; it is not handed to the host",
        );
      }
    }
    return grants;
  }

  async acknowledgeCredentials(hostId: string, held: readonly HeldRegistryCredential[]): Promise<void> {
    const removed = await acknowledgeRegistryCredentials(this.deps.storage, {
      hostId,
      held: held.map((h) => ({ tenantId: h.tenant, registry: h.registry, version: h.version })),
      now: this.deps.clock.now(),
    });
    if (removed > 0) {
      this.deps.log.info({ hostId, removed }, "prior registry credential values removed: every host acknowledged");
      this.deps.onEvent?.({ type: "credentials:removed", hostId, versions: removed });
    }
  }

  /**
   * Settles the attempt's job with the host's result. A result that does not match the
   * contract is not stored as reported: the job fails with cause infrastructure naming what
   * was wrong (the host's fault, not the tenant's), and the operator log says so.
   */
  async finish(ref: AttemptRef, result: AttemptResult): Promise<FinishAnswer> {
    if (!Value.Check(AttemptResult, result)) {
      const first = Value.Errors(AttemptResult, result).First();
      const detail = `the host reported a result that does not match the protocol${first === undefined ? "" : ` (${first.path || "/"}: ${first.message})`}`;
      this.deps.log.error({ jobId: ref.jobId, attempt: ref.attempt }, detail);
      this.deps.onEvent?.({ type: "report:invalid", jobId: ref.jobId, attempt: ref.attempt, detail });
      return this.#settle(ref, refusedResult({ phase: "report", cause: "infrastructure", detail }));
    }
    return this.#settle(ref, result);
  }

  /**
   * One transaction: the attempt finished (fenced on its lease), the job's terminal status,
   * usage and settlement, and what the attempt saved of its lineage counted against the
   * tenant's quota (least recently used lineages evicted over it).
   */
  async #settle(ref: AttemptRef, result: AttemptResult): Promise<FinishAnswer> {
    const now = this.deps.clock.now();
    const saved = result.lineageSave;
    // The host shipped every log line before finishing: its failures' lines are found now, once.
    const report = await withFailureLogSequences(this.deps.storage, ref, result.report);
    return finishAttempt(this.deps.storage, {
      ...ref,
      now,
      result: {
        outcome: result.outcome,
        exitCode: result.exitCode,
        failure: result.failure,
        report: JSON.stringify(report),
        cargoOutput: result.cargoOutput,
        artifacts: result.artifacts,
        artifactRetentionSeconds: ARTIFACT_RETENTION_SECONDS,
      },
      meter: (attempt) => meterAttempt(attempt, now),
      onFinished: async (trx, job, attempt) => {
        if (saved === null) return;
        // The tenant's own quota when the operator set one (operator.tenants.controls), read in
        // the finishing transaction, so a change reaches the next lineage save.
        const controls = await readTenantControls(trx, { tenantId: job.tenant_id });
        await recordLineageSave(
          this.deps.storage,
          {
            tenantId: job.tenant_id,
            repository: job.repository,
            class: job.class,
            host: attempt.host_id,
            lineage: saved.lineage,
            bytes: saved.bytes,
            generation: saved.generation,
            rootGeneration: saved.rootGeneration,
            seedContext: seedContextOfJob(job),
            now,
            quotaBytes: controls?.storageQuotaBytes ?? this.#quotaBytes,
          },
          trx,
        );
      },
    });
  }
}

/** A result the control plane writes for a host: failed before anything ran, with why. */
function refusedResult(failure: AttemptResult["failure"]): AttemptResult {
  return {
    outcome: "failed",
    exitCode: null,
    failure,
    report: { phases: [], crates: [], tests: [], unit: null },
    cargoOutput: null,
    lineageSave: null,
    artifacts: [],
  };
}
