import { type JobEventRow, latestJobEventSequence, readJobEvents } from "@kiln/storage";
import { refuse } from "../http/refusal.js";
import { type BaseContext, type Handler, principalOf } from "./handler.js";
import { lastEventIdHeader, type SseStream, serveEventStream } from "./sse-stream.js";

/** How often an open event stream looks for new job events. */
export const EVENT_POLL_MS = 250;

/** Events read per poll; a full batch is followed at once by the next. */
const EVENT_BATCH = 200;

/** The contract's JobEvent from its row. */
function jobEventOf(row: JobEventRow) {
  return {
    sequence: row.sequence,
    job: row.job_id,
    repository: row.repository,
    status: row.status,
    previous_status: row.previous_status,
    at: row.at,
  };
}

/**
 * Sends the tenant's job events after `after` as SSE events `job` (id: the sequence),
 * polling every EVENT_POLL_MS, until the client disconnects.
 */
async function relayJobEvents(ctx: BaseContext, stream: SseStream, tenantId: string, after: number) {
  let position = after;
  while (!stream.closed) {
    const events = await readJobEvents(ctx.deps.storage, { tenantId, afterSequence: position, limit: EVENT_BATCH });
    for (const row of events) {
      await stream.send({ event: "job", id: String(row.sequence), data: jobEventOf(row) });
      position = row.sequence;
    }
    if (events.length < EVENT_BATCH) await stream.wait(EVENT_POLL_MS);
  }
}

/** A resume position from the Last-Event-ID header; undefined without one. */
function lastEventIdOf(ctx: BaseContext): number | undefined {
  const header = lastEventIdHeader(ctx);
  if (header === undefined) return undefined;
  if (!/^\d{1,15}$/.test(header)) {
    return refuse("invalid_request", "header last-event-id must be a job event sequence this stream sent");
  }
  return Number(header);
}

/**
 * cli.events: the tenant's job status events with a sequence greater than `after`, in
 * durable-sequence order. A reconnecting client's Last-Event-ID wins over `after` (its
 * URL still carries the `after` it first opened with). Without either, only events after
 * the stream opens are sent. Open until the client disconnects.
 */
export const cliEvents: Handler<"cli.events"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  const query = ctx.query.after;
  const after =
    lastEventIdOf(ctx) ?? (query === undefined ? await latestJobEventSequence(ctx.deps.storage, tenantId) : query);
  return serveEventStream(ctx, (stream) => relayJobEvents(ctx, stream, tenantId, after));
};

/**
 * events.stream: the dashboard's hints, the same job events for the session's tenant,
 * from the moment the stream opens (no resume: the dashboard reconciles against
 * authoritative reads when it reconnects).
 */
export const dashboardEvents: Handler<"events.stream"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  const after = await latestJobEventSequence(ctx.deps.storage, tenantId);
  return serveEventStream(ctx, (stream) => relayJobEvents(ctx, stream, tenantId, after));
};
