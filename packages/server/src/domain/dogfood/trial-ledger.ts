import {
  listTrialLedger,
  type StorageOrTransaction,
  type TrialAttemptRow,
  type TrialJobRow,
  type TrialSettlementRow,
} from "@kiln/storage";
import { formatRunRecordId, parseRunRecordId, type RunRecordKind } from "./run-record-identity.js";
import type { TrialTenants } from "./trial-tenants.js";

/** One run record: one attempt of a trial job (attempt 1 of a job not placed yet has no attempt row). */
export interface RunRecordRef {
  readonly id: string;
  readonly kind: RunRecordKind;
  readonly job: TrialJobRow;
  readonly attempt: number;
  readonly attemptRow: TrialAttemptRow | undefined;
}

/**
 * The job ledger of the trial's tenants, indexed for run records: every attempt of every job of
 * the dogfood tenant and of the canary tenant is one run record with a canonical identity.
 */
export class TrialLedger {
  readonly jobs: readonly TrialJobRow[];
  readonly #jobs = new Map<string, TrialJobRow>();
  readonly #attempts = new Map<string, TrialAttemptRow[]>();
  readonly #settlements = new Map<string, TrialSettlementRow[]>();
  /** `owner/name@sha` → the dogfood job that first checked that head (its `head:` record). */
  readonly #heads = new Map<string, string>();

  constructor(
    readonly tenants: TrialTenants,
    ledger: { jobs: TrialJobRow[]; attempts: TrialAttemptRow[]; settlements: TrialSettlementRow[] },
  ) {
    this.jobs = ledger.jobs;
    for (const job of ledger.jobs) {
      this.#jobs.set(job.id, job);
      // Jobs come oldest first, so the first seen is the head's record; later ones are shadows.
      const head = headKeyOf(job, tenants);
      if (head !== null && !this.#heads.has(head)) this.#heads.set(head, job.id);
    }
    for (const attempt of ledger.attempts) push(this.#attempts, attempt.job_id, attempt);
    for (const settlement of ledger.settlements) push(this.#settlements, settlement.job_id, settlement);
  }

  attemptsOf(jobId: string): readonly TrialAttemptRow[] {
    return this.#attempts.get(jobId) ?? [];
  }

  /** Every settlement (transition into a terminal status) the ledger holds for the job. */
  settlementsOf(jobId: string): readonly TrialSettlementRow[] {
    return this.#settlements.get(jobId) ?? [];
  }

  kindOf(job: TrialJobRow): RunRecordKind {
    if (job.tenant_id === this.tenants.probe) return "probe";
    const head = headKeyOf(job, this.tenants);
    return head !== null && this.#heads.get(head) === job.id ? "head" : "shadow";
  }

  /** The canonical identity of attempt `attempt` of the job. */
  identityOf(job: TrialJobRow, attempt: number): string {
    const kind = this.kindOf(job);
    return kind === "head"
      ? formatRunRecordId({ kind, repository: job.repository, sha: job.head_sha ?? "" }, attempt)
      : formatRunRecordId({ kind, job: job.id }, attempt);
  }

  /**
   * The run record an identity names, or undefined. `shadow:<job>` also reaches a dogfood job
   * whose canonical identity is its head; the answer carries the canonical identity.
   */
  resolve(id: string): RunRecordRef | undefined {
    const parsed = parseRunRecordId(id);
    if (parsed === null) return undefined;
    let job: TrialJobRow | undefined;
    if (parsed.kind === "head") {
      const owner = this.#heads.get(`${parsed.repository}@${parsed.sha}`);
      job = owner === undefined ? undefined : this.#jobs.get(owner);
    } else {
      job = this.#jobs.get(parsed.job);
      const tenant = parsed.kind === "probe" ? this.tenants.probe : this.tenants.dogfood;
      if (job?.tenant_id !== tenant) job = undefined;
    }
    if (job === undefined) return undefined;
    return this.#recordOf(job, parsed.attempt);
  }

  /** Every run record: each attempt of each job, and attempt 1 of a job with none yet. */
  records(): RunRecordRef[] {
    const out: RunRecordRef[] = [];
    for (const job of this.jobs) {
      const attempts = this.attemptsOf(job.id);
      if (attempts.length === 0) out.push(this.#recordOf(job, 1) as RunRecordRef);
      for (const a of attempts) out.push(this.#recordOf(job, a.number) as RunRecordRef);
    }
    return out;
  }

  #recordOf(job: TrialJobRow, attempt: number): RunRecordRef | undefined {
    const attemptRow = this.attemptsOf(job.id).find((a) => a.number === attempt);
    if (attemptRow === undefined && attempt !== 1) return undefined;
    return { id: this.identityOf(job, attempt), kind: this.kindOf(job), job, attempt, attemptRow };
  }
}

function headKeyOf(job: TrialJobRow, tenants: TrialTenants): string | null {
  if (job.tenant_id !== tenants.dogfood || job.head_sha === null) return null;
  return `${job.repository}@${job.head_sha}`;
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

/** Reads the trial tenants' ledger. */
export async function loadTrialLedger(target: StorageOrTransaction, tenants: TrialTenants): Promise<TrialLedger> {
  return new TrialLedger(tenants, await listTrialLedger(target, { tenantIds: [tenants.dogfood, tenants.probe] }));
}
