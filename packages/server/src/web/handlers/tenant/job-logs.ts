import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import {
  type Db,
  decodeLogCursor,
  encodeLogCursor,
  InvalidCursorError,
  readJobStatus,
  readLogRecords,
} from "@kiln/storage";
import { searchJobLog } from "../../../domain/jobs/search-job-log.js";
import { refuse } from "../../../domain/refusal.js";
import { type BaseContext, type Handler, principalOf } from "../../http/handler.js";
import { lastEventIdHeader, type SseStream, serveEventStream } from "../../http/sse-stream.js";
import { StreamWakes } from "./stream-wakes.js";

/**
 * How often an open log stream looks for new records while notices are not arriving (the
 * listening connection is lost); otherwise a notice wakes it and it polls only as a fallback
 * (stream-wakes.ts).
 */
export const LOG_POLL_MS = 200;

const DEFAULT_LOG_LIMIT = 100;

/** One JobLogPage, and the sequence it leaves off at (the position its cursor names). */
interface LogPage {
  readonly page: {
    records: { sequence: number; at: string; stream: "stdout" | "stderr" | "system"; attempt: number; text: string }[];
    next_cursor: string | null;
    gaps: never[];
    pending: never[];
    watermarks: { durable: number; received: number };
    settled: boolean;
  };
  readonly position: number;
}

/**
 * The page of the job's durable log after `after`. Sequences are assigned gap-free in the
 * append transaction, so every stored record is durable and nothing is pending: both
 * watermarks are the highest sequence stored. The status is read before the records, so
 * a page only claims `settled` when the job was already terminal and the page reached the
 * last record; the cursor of a settled page is null.
 */
async function readLogPage(
  db: Db,
  job: { tenantId: string; jobId: string },
  after: number,
  limit: number,
): Promise<LogPage> {
  const status = await readJobStatus(db, job);
  if (status === undefined) return refuse("not_found", `no job ${job.jobId}`);
  const { records, highest } = await readLogRecords(db, { jobId: job.jobId, afterSequence: after, limit });
  const position = records.at(-1)?.sequence ?? after;
  const settled = TERMINAL_JOB_STATUSES.has(status) && position >= highest;
  return {
    page: {
      records: records.map((r) => ({
        sequence: r.sequence,
        at: r.at,
        stream: r.stream,
        attempt: r.attempt,
        text: r.text,
      })),
      next_cursor: settled ? null : encodeLogCursor(position),
      gaps: [],
      pending: [],
      watermarks: { durable: highest, received: highest },
      settled,
    },
    position,
  };
}

/** What the log handlers read of a request: the caller, the path's job, the page query. */
type LogContext = BaseContext & {
  readonly params: { readonly id: string };
  readonly query: { readonly cursor?: string; readonly limit?: number };
};

function jobOf(ctx: LogContext): { tenantId: string; jobId: string } {
  return { tenantId: principalOf(ctx).tenantId, jobId: ctx.params.id };
}

const limitOf = (ctx: LogContext): number => ctx.query.limit ?? DEFAULT_LOG_LIMIT;

/** jobs.logs: one page of the job's log from `cursor` (the last sequence delivered). */
export const jobLogs: Handler<"jobs.logs"> = async (ctx) => {
  const after = decodeLogCursor(ctx.query.cursor);
  const { page } = await readLogPage(ctx.db, jobOf(ctx), after, limitOf(ctx));
  return page;
};

/**
 * jobs.logs_search (a kiln extension): the lines of the whole log holding `q`, from `cursor`
 * (the last sequence searched); next_cursor continues a search that stopped at its limit.
 */
export const jobLogsSearch: Handler<"jobs.logs_search"> = async (ctx) => {
  const answer = await searchJobLog(ctx.db, jobOf(ctx), {
    query: ctx.query.q,
    afterSequence: decodeLogCursor(ctx.query.cursor),
    limit: ctx.query.limit ?? 100,
  });
  return {
    query: ctx.query.q,
    matches: answer.matches,
    next_cursor: answer.more ? encodeLogCursor(answer.searchedTo) : null,
    searched_to: answer.searchedTo,
  };
};

/** Where a log stream starts: the Last-Event-ID a reconnecting client sends wins over `cursor`. */
function streamStart(ctx: LogContext): number {
  const header = lastEventIdHeader(ctx);
  if (header === undefined) return decodeLogCursor(ctx.query.cursor);
  try {
    return decodeLogCursor(header);
  } catch (error) {
    if (error instanceof InvalidCursorError) {
      return refuse("invalid_request", "header last-event-id is not a log cursor this stream issued");
    }
    throw error;
  }
}

/**
 * jobs.logs_stream: the log as server-sent events `log`, each a JobLogStreamFrame whose
 * `id:` is the cursor after its page, until the settled page has been sent. The first
 * page is sent at once (it carries the watermarks even when empty); afterwards a page is
 * sent only when it has records or settles, read again whenever the job's log or status
 * changes on any server process (a notice committed with the write, storage notifications)
 * and as a fallback poll. Resuming from any id sent continues after exactly the records
 * already delivered.
 */
export const jobLogsStream: Handler<"jobs.logs_stream"> = async (ctx) => {
  const job = jobOf(ctx);
  const limit = limitOf(ctx);
  const after = streamStart(ctx);
  // Subscribed before the first read: a line committed after that read wakes the stream.
  const wakes = await StreamWakes.open(ctx.deps, (notifications, wake) => notifications.onJob(job.jobId, wake));
  try {
    // Refusals (not_found) are answered before the stream opens.
    const first = await readLogPage(ctx.db, job, after, limit);
    return await serveEventStream(ctx, async (stream) => {
      wakes.attach(stream);
      await followLog(ctx, stream, wakes, { job, limit, first });
    });
  } finally {
    wakes.close();
  }
};

/** Sends the first page, then each page with records, until the settled one. */
async function followLog(
  ctx: LogContext,
  stream: SseStream,
  wakes: StreamWakes,
  input: { job: { tenantId: string; jobId: string }; limit: number; first: LogPage },
): Promise<void> {
  const { job, limit } = input;
  let next = input.first;
  let first = true;
  while (!stream.closed) {
    const { page, position } = next;
    if (first || page.records.length > 0 || page.settled) {
      await stream.send({ event: "log", id: encodeLogCursor(position), data: { job: job.jobId, page } });
      first = false;
    }
    if (page.settled) return;
    if (page.records.length < limit) await stream.wait(wakes.pollMs(LOG_POLL_MS));
    if (stream.closed) return;
    next = await readLogPage(ctx.deps.storage.db, job, position, limit);
  }
}
