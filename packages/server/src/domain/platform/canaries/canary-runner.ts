import { createHash } from "node:crypto";
import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import {
  type CanaryRecord,
  listCanaryOutcomes,
  readHostCapacity,
  recordCanarySubmission,
  reserveCanary,
  type Storage,
} from "@kiln/storage";
import { servingOf } from "../host-serving.js";
import { CANARY_TENANT } from "../platform-tenants.js";
import { canarySubmission } from "./canary-crate.js";
import { CanaryCredential } from "./canary-credential.js";
import { type CanarySettings, canarySlotOf } from "./canary-settings.js";
import { canaryVerdict } from "./canary-verdict.js";

export interface CanaryRunnerDeps {
  readonly storage: Storage;
  readonly clock: Clock;
  readonly log: Logger;
  readonly settings: CanarySettings;
  /**
   * The public API the canaries are submitted through, as any client submits (in process:
   * `app.inject`, so authentication, admission, idempotency and audit all apply).
   */
  readonly app: InProcessApi;
  /**
   * Told once per canary (per process) when a host's newest canary failed or was late: a
   * canary failure is an impairment of its host (the impairment detector raises the platform
   * anomaly and answers the incident). A failure here is logged; the next pass tells it again.
   */
  readonly onCanaryFailure?: (failure: CanaryFailure) => Promise<void>;
}

/** What the canaries need of the public API: one request in, its answer out (buildApp's app is one). */
export interface InProcessApi {
  inject(request: {
    readonly method: "POST";
    readonly url: string;
    readonly headers: Readonly<Record<string, string>>;
    readonly payload?: string;
  }): Promise<{ readonly statusCode: number; readonly body: string; json(): unknown }>;
}

/** A host's newest canary that failed or was late. */
export interface CanaryFailure {
  readonly hostId: string;
  readonly canaryId: string;
  readonly jobId: string | null;
  readonly verdict: "failed" | "late";
  readonly detail: string;
}

/** What one pass did: the canaries it submitted (by host) and the late ones it cancelled. */
export interface CanaryPass {
  readonly slot: string;
  readonly submitted: { host: string; canary: string; jobId: string | null; error: string | null }[];
  readonly cancelled: string[];
}

/** A canary's id, which is also its job's submission key: the slot and a digest of the host. */
export function canaryIdOf(hostId: string, slot: Date): string {
  const host = createHash("sha256").update(hostId).digest("hex").slice(0, 16);
  return `canary-${slot.toISOString().replace(/[-:.]/g, "")}-${host}`;
}

/**
 * The canary loop's body. Each pass, for the current slot (canaries are due at multiples of the
 * interval), reserves one canary per serving host and submits it through the public API with
 * the platform's canary credential; insert-job pins the job to its host through the reserved
 * key. The reservation is unique per host and slot across kiln-servers, and the submission is
 * idempotent by its key, so a pass that died between the two is completed by the next pass
 * without a second job. Canaries that are late and still unfinished are cancelled through the
 * API, so a canary pinned to a host that stopped does not wait in the queue for ever.
 */
export class CanaryRunner {
  readonly #credential: CanaryCredential;
  /** Canaries whose failure this process has told (bounded: only the lookback's are kept). */
  readonly #told = new Set<string>();

  constructor(private readonly deps: CanaryRunnerDeps) {
    this.#credential = new CanaryCredential(deps.storage);
  }

  async runOnce(): Promise<CanaryPass> {
    const { storage, settings } = this.deps;
    const now = this.deps.clock.now();
    const slot = canarySlotOf(now, settings);
    const token = await this.#credential.value(now);
    const hosts = (await readHostCapacity(storage, { now })).filter((h) => servingOf(h, now).serving);
    for (const host of hosts) {
      await reserveCanary(storage, {
        id: canaryIdOf(host.id, slot),
        tenantId: CANARY_TENANT,
        hostId: host.id,
        dueAt: slot,
        now,
      });
    }
    const lookback = new Date(slot.getTime() - (3 * settings.intervalSeconds + settings.lateAfterSeconds) * 1000);
    const recent = await listCanaryOutcomes(storage, { since: lookback.toISOString(), perHost: 8 });
    const submitted: CanaryPass["submitted"] = [];
    for (const canary of recent) {
      if (canary.dueAt !== slot.toISOString() || canary.jobId !== null || canary.submissionError !== null) continue;
      submitted.push({ host: canary.hostId, canary: canary.id, ...(await this.#submit(canary, token)) });
    }
    const cancelled: string[] = [];
    for (const canary of recent) {
      const status = canary.job?.status;
      if (canary.jobId === null || (status !== "queued" && status !== "running")) continue;
      if (canaryVerdict(canary, now, settings) !== "late") continue;
      if (await this.#cancel(canary.jobId, canary.id, token)) cancelled.push(canary.jobId);
    }
    await this.#tellFailures(recent, now);
    return { slot: slot.toISOString(), submitted, cancelled };
  }

  /** Each host's newest judged canary, when it failed or was late, told once. */
  async #tellFailures(recent: readonly CanaryRecord[], now: Date): Promise<void> {
    const onFailure = this.deps.onCanaryFailure;
    if (onFailure === undefined) return;
    const newestJudged = new Map<string, { canary: CanaryRecord; verdict: "failed" | "late" | "passed" }>();
    for (const canary of recent) {
      const verdict = canaryVerdict(canary, now, this.deps.settings);
      if (verdict === "pending" || newestJudged.has(canary.hostId)) continue;
      newestJudged.set(canary.hostId, { canary, verdict });
    }
    const current = new Set(recent.map((c) => c.id));
    for (const id of this.#told) if (!current.has(id)) this.#told.delete(id);
    for (const { canary, verdict } of newestJudged.values()) {
      if (verdict === "passed" || this.#told.has(canary.id)) continue;
      const detail =
        canary.submissionError ??
        (verdict === "late"
          ? `canary ${canary.id} (job ${canary.jobId}) not finished within ${this.deps.settings.lateAfterSeconds} s`
          : `canary ${canary.id} (job ${canary.jobId}) ended ${canary.job?.status ?? "unsubmitted"}`);
      try {
        await onFailure({ hostId: canary.hostId, canaryId: canary.id, jobId: canary.jobId, verdict, detail });
        this.#told.add(canary.id);
      } catch (error) {
        this.deps.log.error({ err: error, host: canary.hostId, canary: canary.id }, "canary failure not reported");
      }
    }
  }

  async #submit(canary: CanaryRecord, token: string): Promise<{ jobId: string | null; error: string | null }> {
    const now = this.deps.clock.now();
    const res = await this.deps.app.inject({
      method: "POST",
      url: "/api/v4/jobs",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        "idempotency-key": canary.id,
      },
      payload: JSON.stringify(canarySubmission()),
    });
    if (res.statusCode === 200) {
      const jobId = res.json() as string;
      await recordCanarySubmission(this.deps.storage, { id: canary.id, jobId, now });
      return { jobId, error: null };
    }
    const error = `jobs.submit answered ${res.statusCode}: ${res.body}`;
    this.deps.log.error({ canary: canary.id, host: canary.hostId }, `canary not submitted: ${error}`);
    await recordCanarySubmission(this.deps.storage, { id: canary.id, error, now });
    return { jobId: null, error };
  }

  async #cancel(jobId: string, canaryId: string, token: string): Promise<boolean> {
    const res = await this.deps.app.inject({
      method: "POST",
      url: `/api/jobs/${jobId}/cancel`,
      headers: { authorization: `Bearer ${token}`, "idempotency-key": `cancel-${canaryId}` },
    });
    if (res.statusCode === 200) return true;
    // A job that finished meanwhile is `conflict`: nothing is left to cancel.
    if (res.statusCode !== 409) {
      this.deps.log.warn({ jobId, canary: canaryId }, `late canary not cancelled: ${res.statusCode} ${res.body}`);
    }
    return false;
  }
}

/**
 * Runs the canary loop: a pass several times per interval (at most every 30 s), so a canary is
 * submitted soon after its slot begins and a late one is cancelled soon after it is late.
 * Every failed pass is logged and emitted (startPeriodicLoop); the next pass tries again.
 */
export function startCanaryLoop(
  runner: CanaryRunner,
  deps: { clock: Clock; log: Logger; settings: CanarySettings; onFailure?: (failure: LoopFailure) => void },
): PeriodicLoop {
  return startPeriodicLoop({
    name: "canary loop",
    clock: deps.clock,
    everyMs: Math.min(30, deps.settings.intervalSeconds / 5) * 1000,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: async () => {
      const pass = await runner.runOnce();
      for (const s of pass.submitted) {
        if (s.jobId !== null) deps.log.info({ host: s.host, job: s.jobId }, `canary ${s.canary} submitted`);
      }
    },
  });
}
