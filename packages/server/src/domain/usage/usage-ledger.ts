import type { UsageExport as UsageExportSchema, Usage as UsageSchema } from "@kiln/contract";
import {
  countMeteredJobs,
  type Db,
  listMeteredAttempts,
  listStorageByteHours,
  listUnplacedCancellations,
  listUploadedBytes,
  listUsageCredits,
  type MeteredAttemptRow,
  type StorageByteHoursRow,
  type StoredRateCard,
  type UnplacedCancellationRow,
  type UploadedBytesRow,
  type UsageCreditRow,
} from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { meterAttempt } from "../hosts/meter-attempt.js";

/**
 * The usage ledger of one tenant and month, derived from what settlement already wrote: every
 * settled attempt is one per-second metering record (the finishing attempt's closed usage in
 * `jobs.usage`, written once by finishAttempt; a lost attempt metered by the same rule from its
 * own start and loss), every attempt the platform ended (lost with its host, or failed with cause
 * infrastructure) is credited in full by an adjustment, a job cancelled before placement is a
 * zero adjustment (it has no record), an operator's credit (usage_credits) is an adjustment in
 * the month it was granted, the hourly lineage storage samples are storage records per day and
 * repository, and uploaded source part bytes are upload records. The report aggregates exactly
 * these items, so its totals equal the export's to the unit and cent.
 */

export type UsageDocument = Static<typeof UsageSchema>;
export type UsageExportDocument = Static<typeof UsageExportSchema>;
export type MeteringRecord = UsageExportDocument["records"][number];
export type UploadRecord = UsageExportDocument["uploads"][number];
export type StorageRecord = UsageExportDocument["storage"][number];
export type Adjustment = UsageExportDocument["adjustments"][number];
type Totals = UsageDocument["totals"];
type DayLine = UsageDocument["days"][number];
type RepositoryLine = UsageDocument["repositories"][number];

/** The month [from, to) of `period` (`YYYY-MM`), as stored timestamps. */
export interface Period {
  readonly period: string;
  readonly from: string;
  readonly to: string;
}

export function periodOf(period: string | undefined, now: Date): Period {
  const text = period ?? now.toISOString().slice(0, 7);
  const year = Number(text.slice(0, 4));
  const month = Number(text.slice(5, 7));
  const from = new Date(Date.UTC(year, month - 1, 1));
  const to = new Date(Date.UTC(year, month, 1));
  return { period: text, from: from.toISOString(), to: to.toISOString() };
}

/** Half up to whole cents; the product is first rounded to micro-cents so 0.1 × 5 stays 0.5. */
export function roundCents(cents: number): number {
  const exact = Math.round(cents * 1e6) / 1e6;
  return Math.floor(exact + 0.5);
}

const GIB = 2 ** 30;
/** A GiB-month is 2^30 bytes held for 720 hours (the rate card's description). */
const GIB_MONTH_BYTE_HOURS = GIB * 720;

/** The price of one vCPU-second on `size`: its own price on the card, else the card's one price. */
export function centsPerVcpuSecond(rateCard: StoredRateCard, size: string): number {
  return rateCard.cents_per_vcpu_second_by_size?.[size] ?? rateCard.cents_per_vcpu_second;
}

/** The metering record of one settled attempt, and its adjustment when the platform ended it. */
export function meteringOf(
  row: MeteredAttemptRow,
  rateCard: StoredRateCard | null,
): { record: MeteringRecord; adjustment: Adjustment | null } {
  const closed = row.state === "finished" && row.usage !== null ? (JSON.parse(row.usage) as ClosedUsage) : null;
  const metered =
    closed !== null
      ? { size: closed.size, seconds: closed.seconds, vcpuSeconds: closed.vcpu_seconds }
      : meterAttempt(
          { startedAt: row.started_at, vcpus: row.vcpus, size: row.size, cancelRequestedAt: row.cancel_requested_at },
          new Date(row.finished_at ?? row.started_at),
        );
  const amount =
    rateCard === null ? null : roundCents(metered.vcpuSeconds * centsPerVcpuSecond(rateCard, metered.size));
  const outcome = row.state === "lost" ? "lost" : (row.outcome ?? "failed");
  const record: MeteringRecord = {
    job: row.job_id,
    attempt: row.number,
    repository: row.repository,
    submitted_by: row.submitted_by,
    size: metered.size as MeteringRecord["size"],
    vcpus: row.vcpus,
    started_at: row.started_at,
    ended_at: new Date(new Date(row.started_at).getTime() + metered.seconds * 1000).toISOString(),
    vcpu_seconds: metered.vcpuSeconds,
    outcome,
    amount_cents: amount,
  };
  const failure = row.failure === null ? null : (JSON.parse(row.failure) as { cause?: string; detail?: string });
  const infrastructure =
    row.state === "lost" || (outcome === "failed" && row.state === "finished" && failure?.cause === "infrastructure");
  if (!infrastructure || metered.vcpuSeconds === 0) return { record, adjustment: null };
  return {
    record,
    adjustment: {
      kind: "infrastructure",
      job: row.job_id,
      attempt: row.number,
      reason:
        row.state === "lost"
          ? `attempt ${row.number} lost with its host: not charged`
          : `attempt ${row.number} failed with cause infrastructure (${failure?.detail ?? "platform failure"}): not charged`,
      vcpu_seconds: -metered.vcpuSeconds,
      amount_cents: amount === null ? null : -amount,
      at: row.finished_at ?? row.started_at,
    },
  };
}

interface ClosedUsage {
  readonly size: string;
  readonly seconds: number;
  readonly vcpu_seconds: number;
}

export function cancellationOf(row: UnplacedCancellationRow, rateCard: StoredRateCard | null): Adjustment {
  return {
    kind: "cancelled_before_placement",
    job: row.id,
    attempt: null,
    reason: `cancelled before placement${row.cancel_requested_by === null ? "" : ` by ${row.cancel_requested_by}`}: no attempt ran, nothing is charged`,
    vcpu_seconds: 0,
    amount_cents: rateCard === null ? null : 0,
    at: row.finished_at,
  };
}

export function uploadOf(row: UploadedBytesRow, rateCard: StoredRateCard | null): UploadRecord {
  return {
    date: row.date,
    upload: row.upload,
    repository: row.repository,
    principal: row.reserved_by,
    bytes: row.bytes,
    amount_cents: rateCard === null ? null : roundCents((row.bytes / GIB) * (rateCard.cents_per_gib_uploaded ?? 0)),
  };
}

/** An operator's credit as an adjustment: its amounts negated; no amount without a rate card. */
export function creditOf(row: UsageCreditRow, rateCard: StoredRateCard | null): Adjustment {
  return {
    kind: "operator_credit",
    job: row.job,
    attempt: null,
    reason: `operator credit by ${row.granted_by}: ${row.reason}`,
    vcpu_seconds: -row.vcpu_seconds,
    amount_cents: rateCard === null ? null : -row.amount_cents,
    at: row.granted_at,
  };
}

export function storageOf(row: StorageByteHoursRow, rateCard: StoredRateCard | null): StorageRecord {
  return {
    date: row.date,
    repository: row.repository,
    byte_hours: row.byte_hours,
    amount_cents:
      rateCard === null ? null : roundCents((row.byte_hours / GIB_MONTH_BYTE_HOURS) * rateCard.cents_per_gib_month),
  };
}

/** Where an export page resumes: the phase, the instant pinned by the first page, and the phase's cursor. */
export type LedgerPhase = "attempts" | "cancellations" | "credits" | "storage" | "uploads";
export interface LedgerPosition {
  readonly phase: LedgerPhase;
  readonly asOf: string;
  readonly period: string;
  readonly cursor: string | null;
}

const PHASES: readonly LedgerPhase[] = ["attempts", "cancellations", "credits", "storage", "uploads"];
const TIMESTAMP = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/;

export function encodePosition(position: LedgerPosition): string {
  return Buffer.from(
    JSON.stringify([position.phase, position.asOf, position.period, position.cursor]),
    "utf8",
  ).toString("base64url");
}

/** Null when `text` is not a position this service issued (the caller refuses it naming query.cursor). */
export function decodePosition(text: string): LedgerPosition | null {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return null;
  const bytes = Buffer.from(text, "base64url");
  if (bytes.toString("base64url") !== text) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString("utf8"));
  } catch {
    return null;
  }
  if (!Array.isArray(parsed) || parsed.length !== 4) return null;
  const [phase, asOf, period, cursor] = parsed as unknown[];
  if (typeof phase !== "string" || !PHASES.includes(phase as LedgerPhase)) return null;
  if (typeof asOf !== "string" || !TIMESTAMP.test(asOf)) return null;
  if (typeof period !== "string" || !/^[0-9]{4}-(0[1-9]|1[0-2])$/.test(period)) return null;
  if (cursor !== null && typeof cursor !== "string") return null;
  return { phase: phase as LedgerPhase, asOf, period, cursor };
}

export interface LedgerPage {
  readonly records: MeteringRecord[];
  readonly storage: StorageRecord[];
  readonly uploads: UploadRecord[];
  readonly adjustments: Adjustment[];
  /** Null once every phase is read. */
  readonly next: LedgerPosition | null;
}

/**
 * Up to `limit` items of the ledger from `position`: metering records (each with its
 * adjustment), then cancellations before placement, operator credits, storage records and
 * upload records, each phase keyset-paged in storage and limited to what had settled by the
 * position's instant (storage: the hours completed before it). One page's memory.
 */
export async function readLedgerPage(
  db: Db,
  input: {
    tenantId: string;
    period: Period;
    position: LedgerPosition;
    limit: number;
    rateCard: StoredRateCard | null;
  },
): Promise<LedgerPage> {
  const { tenantId, period, rateCard } = input;
  const records: MeteringRecord[] = [];
  const storage: StorageRecord[] = [];
  const uploads: UploadRecord[] = [];
  const adjustments: Adjustment[] = [];
  const asOf = input.position.asOf;
  let phase: LedgerPhase | null = input.position.phase;
  let cursor = input.position.cursor;
  let room = input.limit;
  const range = { tenantId, from: period.from, to: period.to };
  while (phase !== null && room > 0) {
    let next: string | null;
    if (phase === "attempts") {
      const page = await listMeteredAttempts(db, { ...range, settledBy: asOf, limit: room, cursor });
      for (const row of page.rows) {
        const metered = meteringOf(row, rateCard);
        records.push(metered.record);
        if (metered.adjustment !== null) adjustments.push(metered.adjustment);
      }
      room -= page.rows.length;
      next = page.nextCursor;
    } else if (phase === "cancellations") {
      const page = await listUnplacedCancellations(db, { ...range, settledBy: asOf, limit: room, cursor });
      for (const row of page.rows) adjustments.push(cancellationOf(row, rateCard));
      room -= page.rows.length;
      next = page.nextCursor;
    } else if (phase === "credits") {
      const page = await listUsageCredits(db, { ...range, grantedBy: asOf, limit: room, cursor });
      for (const row of page.rows) adjustments.push(creditOf(row, rateCard));
      room -= page.rows.length;
      next = page.nextCursor;
    } else if (phase === "storage") {
      const page = await listStorageByteHours(db, {
        tenantId,
        fromHour: period.from.slice(0, 13),
        toHour: period.to.slice(0, 13),
        beforeHour: asOf.slice(0, 13),
        limit: room,
        cursor,
      });
      for (const row of page.rows) storage.push(storageOf(row, rateCard));
      room -= page.rows.length;
      next = page.nextCursor;
    } else {
      const page = await listUploadedBytes(db, { ...range, receivedBy: asOf, limit: room, cursor });
      for (const row of page.rows) uploads.push(uploadOf(row, rateCard));
      room -= page.rows.length;
      next = page.nextCursor;
    }
    if (next !== null) {
      cursor = next;
    } else {
      phase = PHASES[PHASES.indexOf(phase) + 1] ?? null;
      cursor = null;
    }
  }
  return {
    records,
    storage,
    uploads,
    adjustments,
    next: phase === null ? null : { phase, asOf, period: period.period, cursor },
  };
}

/** A day or repository line as it accumulates. */
interface Line {
  vcpuSeconds: number;
  bySize: Map<string, number>;
  attempts: number;
  byteHours: number;
  bytesUploaded: number;
  cents: number;
}

const newLine = (): Line => ({
  vcpuSeconds: 0,
  bySize: new Map(),
  attempts: 0,
  byteHours: 0,
  bytesUploaded: 0,
  cents: 0,
});

function addRecord(line: Line, record: MeteringRecord): void {
  line.vcpuSeconds += record.vcpu_seconds;
  line.bySize.set(record.size, (line.bySize.get(record.size) ?? 0) + record.vcpu_seconds);
  line.attempts += 1;
  line.cents += record.amount_cents ?? 0;
}

function addStorage(line: Line, record: StorageRecord): void {
  line.byteHours += record.byte_hours;
  line.cents += record.amount_cents ?? 0;
}

function addUpload(line: Line, upload: UploadRecord): void {
  line.bytesUploaded += upload.bytes;
  line.cents += upload.amount_cents ?? 0;
}

const SIZE_ORDER = ["kiln2-cpu", "kiln4-cpu", "kiln8-cpu", "kiln16-cpu"];

function bySizeOf(line: Line): DayLine["vcpu_seconds_by_size"] {
  return [...line.bySize.entries()]
    .sort(([a], [b]) => SIZE_ORDER.indexOf(a) - SIZE_ORDER.indexOf(b))
    .map(([size, vcpu_seconds]) => ({ size: size as DayLine["vcpu_seconds_by_size"][number]["size"], vcpu_seconds }));
}

function measuresOf(line: Line, jobs: number, priced: boolean) {
  return {
    vcpu_seconds: line.vcpuSeconds,
    vcpu_seconds_by_size: bySizeOf(line),
    jobs,
    attempts: line.attempts,
    storage_byte_hours: line.byteHours,
    bytes_uploaded: line.bytesUploaded,
    amount_cents: priced ? line.cents : null,
  };
}

export interface UsageSummary {
  readonly days: DayLine[];
  readonly repositories: RepositoryLine[];
  readonly totals: Totals;
}

/**
 * Aggregates the whole ledger of the period as of `asOf`, page by page (1000 items a read), so
 * memory holds one page and the lines, never the records; distinct jobs are counted by the
 * database (countMeteredJobs, the same filters as the records).
 */
export async function summarizeUsage(
  db: Db,
  input: { tenantId: string; period: Period; asOf: string; rateCard: StoredRateCard | null },
): Promise<UsageSummary> {
  const priced = input.rateCard !== null;
  const days = new Map<string, Line>();
  const repositories = new Map<string, Line>();
  const total = newLine();
  let adjustmentVcpuSeconds = 0;
  let adjustmentCents = 0;
  const lineOf = (map: Map<string, Line>, key: string): Line => {
    let line = map.get(key);
    if (line === undefined) {
      line = newLine();
      map.set(key, line);
    }
    return line;
  };
  let position: LedgerPosition | null = {
    phase: "attempts",
    asOf: input.asOf,
    period: input.period.period,
    cursor: null,
  };
  while (position !== null) {
    const page: LedgerPage = await readLedgerPage(db, {
      tenantId: input.tenantId,
      period: input.period,
      position,
      limit: 1000,
      rateCard: input.rateCard,
    });
    for (const record of page.records) {
      addRecord(lineOf(days, record.started_at.slice(0, 10)), record);
      addRecord(lineOf(repositories, record.repository), record);
      addRecord(total, record);
    }
    for (const record of page.storage) {
      addStorage(lineOf(days, record.date), record);
      addStorage(lineOf(repositories, record.repository), record);
      addStorage(total, record);
    }
    for (const upload of page.uploads) {
      addUpload(lineOf(days, upload.date), upload);
      addUpload(lineOf(repositories, upload.repository), upload);
      addUpload(total, upload);
    }
    for (const adjustment of page.adjustments) {
      adjustmentVcpuSeconds += adjustment.vcpu_seconds;
      adjustmentCents += adjustment.amount_cents ?? 0;
    }
    position = page.next;
  }
  const jobs = await countMeteredJobs(db, {
    tenantId: input.tenantId,
    from: input.period.from,
    to: input.period.to,
    settledBy: input.asOf,
  });
  return {
    days: [...days.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([date, line]) => ({ date, ...measuresOf(line, jobs.byDay.get(date) ?? 0, priced) })),
    repositories: [...repositories.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([repository, line]) => ({
        repository,
        ...measuresOf(line, jobs.byRepository.get(repository) ?? 0, priced),
      })),
    totals: {
      vcpu_seconds: total.vcpuSeconds + adjustmentVcpuSeconds,
      vcpu_seconds_by_size: bySizeOf(total),
      jobs: jobs.total,
      attempts: total.attempts,
      storage_byte_hours: total.byteHours,
      bytes_uploaded: total.bytesUploaded,
      adjustment_vcpu_seconds: adjustmentVcpuSeconds,
      adjustment_amount_cents: priced ? adjustmentCents : null,
      amount_cents: priced ? total.cents + adjustmentCents : null,
    },
  };
}

/** The rate card as the Usage documents show it. */
export function rateCardView(rateCard: StoredRateCard | null): UsageDocument["rate_card"] {
  if (rateCard === null) return null;
  return {
    cents_per_vcpu_second: rateCard.cents_per_vcpu_second,
    ...(rateCard.cents_per_vcpu_second_by_size === undefined
      ? {}
      : { cents_per_vcpu_second_by_size: { ...rateCard.cents_per_vcpu_second_by_size } }),
    cents_per_gib_month: rateCard.cents_per_gib_month,
    ...(rateCard.cents_per_gib_uploaded === undefined
      ? {}
      : { cents_per_gib_uploaded: rateCard.cents_per_gib_uploaded }),
  };
}
