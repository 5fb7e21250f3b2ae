import type { DogfoodRunRecord } from "@kiln/contract";
import type { DogfoodIncidentRow, DogfoodMaintenanceRow } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { findingsOfJob, inMaintenance, parseReport, settlingAttemptOf } from "./ledger-findings.js";
import type { RunRecordRef, TrialLedger } from "./trial-ledger.js";
import type { PeriodDocument } from "./trial-period.js";
import { incidentView } from "./trial-views.js";

export type RunRecordDocument = Static<typeof DogfoodRunRecord>;

const DAY_MS = 24 * 3600 * 1000;
const seconds = (from: string, to: string) => Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);

/** The trial window containing `instant` (any clock's, closed or open), else its UTC day. */
export function windowContaining(period: PeriodDocument, instant: string): { starts_at: string; ends_at: string } {
  const t = Date.parse(instant);
  const windows = [...period.closed_windows, ...(period.open_window === null ? [] : [period.open_window])];
  const found = windows.find((w) => Date.parse(w.starts_at) <= t && t < Date.parse(w.ends_at));
  if (found !== undefined) return { starts_at: found.starts_at, ends_at: found.ends_at };
  const day = Math.floor(t / DAY_MS) * DAY_MS;
  return { starts_at: new Date(day).toISOString(), ends_at: new Date(day + DAY_MS).toISOString() };
}

/** Nearest-rank 95th percentile: at least 95% of the values are at most it. */
export function p95(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(0.95 * sorted.length) - 1] ?? null;
}

/**
 * One run record with every field present or named absent with its reason, its threshold labels
 * and every incident naming it. `cargoOutput` is the settling attempt's retained output when read.
 */
export function runRecordView(input: {
  readonly ref: RunRecordRef;
  readonly ledger: TrialLedger;
  readonly period: PeriodDocument;
  readonly incidents: readonly DogfoodIncidentRow[];
  readonly maintenance: readonly DogfoodMaintenanceRow[];
  readonly cargoOutput: string | null;
}): RunRecordDocument {
  const { ref, ledger } = input;
  const job = ref.job;
  const a = ref.attemptRow;
  const absent: { field: string; reason: string }[] = [];
  const record: Record<string, unknown> = {};
  const put = (field: string, value: unknown, reason: string) => {
    if (value === null || value === undefined) absent.push({ field, reason });
    else record[field] = value;
  };
  const notStarted = "the attempt has not started";
  put("head_sha", job.head_sha, "the job names no head commit (it was not submitted for a check)");
  put("attempt_state", a?.state, notStarted);
  put("host", a?.host_id, notStarted);
  put("started_at", a?.started_at, notStarted);
  put("finished_at", a?.finished_at, a === undefined ? notStarted : "the attempt is still running");
  put(
    "outcome",
    a?.outcome,
    a === undefined
      ? notStarted
      : a.state === "lost"
        ? "the attempt was lost with its host and reported no outcome"
        : "the attempt has not finished",
  );
  put(
    "exit_code",
    a?.exit_code,
    a === undefined
      ? notStarted
      : a.state === "finished"
        ? "cargo did not exit (the unit ended before it did)"
        : "the attempt reported no exit",
  );
  put(
    "queue_seconds",
    ref.attempt === 1 && a !== undefined ? seconds(job.accepted_at, a.started_at) : null,
    ref.attempt === 1 ? notStarted : "queue time is measured for the first attempt only",
  );
  put(
    "duration_seconds",
    a?.finished_at == null ? null : seconds(a.started_at, a.finished_at),
    a === undefined ? notStarted : "the attempt has not ended",
  );
  const report = parseReport(a?.report ?? null);
  put(
    "tests",
    report?.tests === undefined
      ? null
      : {
          passed: report.tests.filter((t) => t.outcome === "passed").length,
          failed: report.tests.filter((t) => t.outcome === "failed").length,
          ignored: report.tests.filter((t) => t.outcome === "ignored").length,
        },
    a === undefined ? notStarted : "the attempt reported no evidence",
  );
  put(
    "cargo_output_sha256",
    a?.cargo_output_sha256,
    a === undefined ? notStarted : "no cargo output was retained for the attempt",
  );
  const settling = settlingAttemptOf(ledger, job.id);
  const isSettling = settling !== undefined && settling.number === ref.attempt;
  const notSettling =
    job.finished_at === null ? "the job has not settled" : "another attempt settled the job; this one carries none";
  put(
    "failure",
    isSettling || (settling === undefined && job.finished_at !== null) ? parseJson(job.failure) : null,
    job.status === "passed" ? "the job passed" : notSettling,
  );
  put("usage", isSettling ? parseJson(job.usage) : null, isSettling ? "no usage was recorded" : notSettling);
  const settlements = ledger.settlementsOf(job.id).length;
  put("settlements", settlements > 0 ? settlements : null, "the job has not settled");

  const labels: string[] = [];
  let window: { starts_at: string; ends_at: string } | null = null;
  if (a !== undefined) {
    window = windowContaining(input.period, a.started_at);
    const w = window;
    // The p95 of the durations of records of the same kind (probes apart from dogfood jobs) in the window.
    const peers = ledger
      .records()
      .filter((r) => (r.kind === "probe") === (ref.kind === "probe"))
      .map((r) => r.attemptRow)
      .filter(
        (x): x is NonNullable<typeof x> =>
          x !== undefined && x.finished_at !== null && x.started_at >= w.starts_at && x.started_at < w.ends_at,
      )
      .map((x) => seconds(x.started_at, x.finished_at ?? x.started_at));
    const limit = p95(peers);
    put("window_p95_duration_seconds", limit, "no attempt of its kind finished in its window");
    const duration = record.duration_seconds as number | undefined;
    if (limit !== null && duration !== undefined && duration > limit) labels.push("duration_over_window_p95");
    if (a.state === "lost") labels.push("lost");
  } else {
    absent.push({ field: "window_p95_duration_seconds", reason: notStarted });
  }
  put("window", window, notStarted);
  if (job.status === "failed" && isSettling) labels.push("failed");
  if (ref.kind === "probe" && inMaintenance(job.accepted_at, input.maintenance) !== undefined) {
    labels.push("declared_maintenance");
  }
  for (const f of findingsOfJob(ledger, job, input.cargoOutput, input.maintenance)) {
    if (
      (f.class === "wrong_green" || f.class === "duplicate_execution" || f.class === "duplicate_charge") &&
      f.records.includes(ref.id)
    ) {
      labels.push(f.class);
    }
  }

  return {
    id: ref.id,
    kind: ref.kind,
    tenant: job.tenant_id,
    job: job.id,
    attempt: ref.attempt,
    attempts: ledger.attemptsOf(job.id).length,
    repository: job.repository,
    status: job.status,
    accepted_at: job.accepted_at,
    ...record,
    absent,
    threshold_labels: labels,
    incidents: input.incidents.filter((i) => (JSON.parse(i.records) as string[]).includes(ref.id)).map(incidentView),
  } as RunRecordDocument;
}

function parseJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
