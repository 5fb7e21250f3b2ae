import { type Clock, type Logger, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import {
  type BlobStore,
  type DueCheckRun,
  findInstallationOfRepository,
  leaseCheckRun,
  listDueCheckRuns,
  readJob,
  recordCheckRunFailure,
  recordCheckRunReported,
  type Storage,
} from "@kiln/storage";
import { checkStageOf, completedCheckRun } from "./check-run-report.js";
import { ANNOTATIONS_PER_REQUEST, type CheckRunWrite, type GitHubApp, ProviderError } from "./github-app.js";

/** What the reporter tells besides its log: each report made, each failure (with whether it is retried). */
export type CheckRunEvent =
  | { readonly type: "check:reported"; readonly jobId: string; readonly stage: string; readonly checkRunId: number }
  | {
      readonly type: "check:error";
      readonly jobId: string;
      readonly detail: string;
      readonly retryAt: Date | null;
      readonly abandoned: boolean;
    };

export interface CheckRunReporterDeps {
  readonly storage: Storage;
  readonly blobs: BlobStore;
  readonly app: GitHubApp;
  readonly clock: Clock;
  readonly log: Logger;
  /** The origin of kiln's pages: the check run's details URL and evidence link. */
  readonly publicOrigin: string;
  readonly onEvent?: (event: CheckRunEvent) => void;
}

/** Jobs accepted longer ago than this are not reported (a check run about old history helps no one). */
const REPORT_WINDOW_MS = 7 * 24 * 3600 * 1000;
/** A report holds its job's row this long, so two server processes never report one job at once. */
const LEASE_SECONDS = 120;
const BATCH = 50;
const BACKOFF_BASE_SECONDS = 5;
const BACKOFF_MAX_SECONDS = 600;

/**
 * Reports each job submitted with `check.head_sha` as the `kiln` check run on that commit:
 * created `queued` (details URL the job's page, external id the job id), `in_progress` once the
 * job runs, `completed` at its terminal status with conclusion, summary and annotations (in
 * requests of at most 50). The state is durable (`check_runs`, storage `source-hosting/`), so
 * the report is driven from the jobs' statuses, not from events: a pass reads which jobs' check
 * runs lag their status and brings each up to date. A restart, a provider error or a lost nudge
 * only delays it. Exactly one check run per job: its id is recorded once created, and before
 * creating one the reporter looks for a run with the job's external id on the commit (a create
 * whose answer was lost). Failures are logged and emitted, and retried with exponential backoff
 * on the clock, honouring the provider's Retry-After and rate-limit reset; a refusal the
 * provider will repeat (a 4xx other than a rate limit, no claimed installation covering the
 * repository) abandons that job's check run, logged and emitted.
 */
export class CheckRunReporter {
  #loop: PeriodicLoop | null = null;
  #chain: Promise<void> = Promise.resolve();

  constructor(private readonly deps: CheckRunReporterDeps) {}

  /** Runs passes every `everyMs` on the clock (and on nudge) until stopped. */
  start(everyMs = 5000): void {
    this.#loop ??= startPeriodicLoop({
      name: "check-run-reporter",
      clock: this.deps.clock,
      everyMs,
      log: this.deps.log,
      run: () => this.pass(),
    });
  }

  /** A job's status changed in this process: report soon. */
  nudge(): void {
    this.#loop?.nudge();
  }

  async stop(): Promise<void> {
    await this.#loop?.stop();
    this.#loop = null;
    await this.#chain;
  }

  /** One pass over every due check run; passes run one at a time. */
  pass(): Promise<void> {
    const next = this.#chain.then(() => this.#pass());
    this.#chain = next.catch(() => {});
    return next;
  }

  async #pass(): Promise<void> {
    const now = this.deps.clock.now();
    const due = await listDueCheckRuns(this.deps.storage, {
      now,
      since: new Date(now.getTime() - REPORT_WINDOW_MS),
      limit: 200,
    });
    for (const row of due) {
      const stage = checkStageOf(row.status);
      if (stage === null || stage === row.reportedStage) continue;
      if (
        !(await leaseCheckRun(
          this.deps.storage,
          { jobId: row.jobId, leaseSeconds: LEASE_SECONDS },
          this.deps.clock.now(),
        ))
      ) {
        continue;
      }
      await this.#report(row, stage);
    }
  }

  async #report(row: DueCheckRun, stage: "queued" | "in_progress" | "completed"): Promise<void> {
    let checkRunId = row.checkRunId;
    try {
      const installation = await findInstallationOfRepository(this.deps.storage, {
        tenantId: row.tenantId,
        repository: row.repository,
      });
      if (installation === undefined || installation.state !== "active") {
        throw new ProviderError(
          installation === undefined
            ? `no app installation claimed by the tenant covers ${row.repository}`
            : `the app installation covering ${row.repository} is ${installation.state}`,
          422,
          null,
        );
      }
      const id = installation.installationId;
      const app = this.deps.app;
      const write: CheckRunWrite = stage === "completed" ? await this.#completed(row) : { status: stage };
      const annotations = write.output?.annotations ?? [];
      const first =
        write.output === undefined
          ? write
          : { ...write, output: { ...write.output, annotations: annotations.slice(0, BATCH) } };
      checkRunId ??= await app.findCheckRun(id, row.repository, row.headSha, row.jobId);
      if (checkRunId === null) {
        checkRunId = await app.createCheckRun(id, row.repository, {
          ...first,
          head_sha: row.headSha,
          external_id: row.jobId,
          details_url: `${this.deps.publicOrigin}/jobs/${encodeURIComponent(row.jobId)}`,
          ...(stage === "queued" ? {} : { started_at: this.deps.clock.now().toISOString() }),
        });
      } else {
        await app.updateCheckRun(id, row.repository, checkRunId, first);
      }
      // The provider appends the annotations of each further update to the run's.
      for (let at = ANNOTATIONS_PER_REQUEST; at < annotations.length; at += ANNOTATIONS_PER_REQUEST) {
        const output = write.output;
        if (output === undefined) break;
        await app.updateCheckRun(id, row.repository, checkRunId, {
          ...write,
          output: { ...output, annotations: annotations.slice(at, at + ANNOTATIONS_PER_REQUEST) },
        });
      }
      await recordCheckRunReported(this.deps.storage, { jobId: row.jobId, stage, checkRunId }, this.deps.clock.now());
      this.deps.onEvent?.({ type: "check:reported", jobId: row.jobId, stage, checkRunId });
    } catch (error) {
      await this.#failed(row, checkRunId, error);
    }
  }

  async #completed(row: DueCheckRun) {
    const record = await readJob(this.deps.storage, { tenantId: row.tenantId, jobId: row.jobId });
    if (record === undefined) throw new Error(`job ${row.jobId} is gone`);
    const last = record.attempts.at(-1);
    const sha = last?.cargo_output_sha256 ?? null;
    const cargoOutput = sha === null ? null : (await this.deps.blobs.get(sha)).toString("utf8");
    return completedCheckRun(record, cargoOutput, this.deps.publicOrigin);
  }

  async #failed(row: DueCheckRun, checkRunId: number | null, error: unknown): Promise<void> {
    const provider = error instanceof ProviderError ? error : null;
    const detail = error instanceof Error ? error.message : String(error);
    const abandoned = provider !== null && !provider.transient;
    let retryAt: Date | null = null;
    if (!abandoned) {
      const backoff = Math.min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** Math.min(row.failures, 10));
      const seconds = Math.max(backoff, provider?.retryAfterSeconds ?? 0);
      retryAt = new Date(this.deps.clock.now().getTime() + seconds * 1000);
    }
    const message = abandoned
      ? `check run of job ${row.jobId} abandoned: ${detail}`
      : `check run of job ${row.jobId} not reported (retried at ${retryAt?.toISOString()}): ${detail}`;
    this.deps.log.error({ jobId: row.jobId, status: provider?.status ?? null }, message);
    this.deps.onEvent?.({ type: "check:error", jobId: row.jobId, detail, retryAt, abandoned });
    await recordCheckRunFailure(
      this.deps.storage,
      { jobId: row.jobId, error: detail, retryAt, abandon: abandoned, checkRunId },
      this.deps.clock.now(),
    );
  }
}
