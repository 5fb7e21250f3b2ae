import { type JobEventRow, latestJobEventSequence, readJobEvents } from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import { type BaseContext, type Handler, principalOf, type REPLY_SENT } from "../../http/handler.js";
import { lastEventIdHeader, type SseStream, serveEventStream } from "../../http/sse-stream.js";
import { StreamWakes } from "./stream-wakes.js";

/**
 * How often an open event stream looks for new job events while notices are not arriving (the
 * listening connection is lost); otherwise a notice wakes it (stream-wakes.ts).
 */
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
 * Sends the tenant's job events after `after` as SSE events `job` (id: the sequence), read
 * again whenever one is appended for the tenant on any server process (a notice committed with
 * it, storage notifications) and as a fallback poll, until the client disconnects.
 */
async function relayJobEvents(
  ctx: BaseContext,
  stream: SseStream,
  wakes: StreamWakes,
  tenantId: string,
  after: number,
) {
  wakes.attach(stream);
  let position = after;
  while (!stream.closed) {
    const events = await readJobEvents(ctx.deps.storage, { tenantId, afterSequence: position, limit: EVENT_BATCH });
    for (const row of events) {
      await stream.send({ event: "job", id: String(row.sequence), data: jobEventOf(row) });
      position = row.sequence;
    }
    if (events.length < EVENT_BATCH) await stream.wait(wakes.pollMs(EVENT_POLL_MS));
  }
}

/**
 * Serves the tenant's job events after the position `start` reads, subscribed before that read
 * (so an event appended after it wakes the stream).
 */
async function serveJobEvents(
  ctx: BaseContext,
  tenantId: string,
  start: () => Promise<number>,
): Promise<typeof REPLY_SENT> {
  const wakes = await StreamWakes.open(ctx.deps, (notifications, wake) => notifications.onJobEvents(tenantId, wake));
  try {
    const after = await start();
    return await serveEventStream(ctx, (stream) => relayJobEvents(ctx, stream, wakes, tenantId, after));
  } finally {
    wakes.close();
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
  const resume = lastEventIdOf(ctx) ?? query;
  return serveJobEvents(
    ctx,
    tenantId,
    async () => resume ?? (await latestJobEventSequence(ctx.deps.storage, tenantId)),
  );
};

/**
 * events.stream: the dashboard's hints, the same job events for the session's tenant,
 * from the moment the stream opens (no resume: the dashboard reconciles against
 * authoritative reads when it reconnects).
 */
export const dashboardEvents: Handler<"events.stream"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  return serveJobEvents(ctx, tenantId, () => latestJobEventSequence(ctx.deps.storage, tenantId));
};
