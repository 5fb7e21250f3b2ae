import { type BaseContext, REPLY_SENT } from "./handler.js";

/** A comment line every 15 s keeps proxies and load balancers from closing an idle stream. */
export const HEARTBEAT_MS = 15_000;

/** The HTTP servers whose app is closing: their streams end at once rather than at their next poll. */
const closingServers = new WeakSet<object>();
/** The open streams of each HTTP server, to wake when its app closes. */
const openStreams = new WeakMap<object, Set<SseStream>>();

/**
 * Ends every open stream of `server` now (buildApp's preClose hook): a stream otherwise notices
 * the shutdown only at its next read, and its busy connection holds up the server's close.
 */
export function endStreamsOf(server: object): void {
  closingServers.add(server);
  for (const stream of openStreams.get(server) ?? []) stream.nudge();
}

/** One server-sent event: `event:` name, `id:` (what a client resumes from) and JSON data. */
export interface SseEvent {
  readonly event: string;
  readonly id: string;
  readonly data: unknown;
}

/**
 * A server-sent event stream written straight to the socket (the reply is hijacked, so
 * nothing Fastify does after the handler touches it). It counts as closed once the
 * client disconnects, the handler ends it, or the server is closing (endStreamsOf wakes it)
 * or stopped listening, so closing the server is not held up by it.
 */
export class SseStream {
  private ended = false;
  private wake: (() => void) | null = null;
  private nudged = false;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly wasListening: boolean;

  constructor(
    private readonly ctx: BaseContext,
    heartbeatMs = HEARTBEAT_MS,
  ) {
    const { reply } = ctx;
    this.wasListening = ctx.request.server.server.listening;
    let open = openStreams.get(ctx.request.server.server);
    if (open === undefined) {
      open = new Set();
      openStreams.set(ctx.request.server.server, open);
    }
    open.add(this);
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    raw.flushHeaders();
    const stop = () => this.markEnded();
    raw.on("close", stop);
    raw.on("error", stop);
    this.heartbeat = setInterval(() => {
      if (!this.closed) raw.write(": keep-alive\n\n");
    }, heartbeatMs);
    this.heartbeat.unref();
  }

  /** The client went away, the stream was ended, or the server is shutting down. */
  get closed(): boolean {
    return this.ended || this.serverStopped;
  }

  /** Writes one event; waits while the client's socket buffer is full. */
  async send(event: SseEvent): Promise<void> {
    if (this.closed) return;
    const frame = `event: ${event.event}\nid: ${event.id}\ndata: ${JSON.stringify(event.data)}\n\n`;
    if (!this.ctx.reply.raw.write(frame)) await this.drained();
  }

  /**
   * Ends the current (or next) wait at once: something the stream reads has changed. A
   * nudge that comes while the stream is not waiting is kept, so it is never lost between
   * a read and the wait after it.
   */
  nudge(): void {
    if (this.wake !== null) this.wake();
    else this.nudged = true;
  }

  /** Sleeps `ms` on the app's clock, or less when the stream closes or is nudged meanwhile. */
  wait(ms: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.nudged) {
      this.nudged = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = this.ctx.deps.clock.after(ms, () => {
        this.wake = null;
        resolve();
      });
      this.wake = () => {
        timer.cancel();
        this.wake = null;
        resolve();
      };
    });
  }

  /**
   * Ends the response (idempotent). When the server is shutting down the connection is
   * closed too: it was busy when the server closed its idle ones, and would otherwise be
   * kept alive, holding up the close, until its keep-alive timeout.
   */
  end(): void {
    const raw = this.ctx.reply.raw;
    const stopping = this.serverStopped;
    this.markEnded();
    if (raw.writableEnded || raw.destroyed) return;
    const socket = raw.socket;
    raw.end(() => {
      if (stopping) socket?.end();
    });
  }

  private get serverStopped(): boolean {
    const server = this.ctx.request.server.server;
    return closingServers.has(server) || (this.wasListening && !server.listening);
  }

  private drained(): Promise<void> {
    const raw = this.ctx.reply.raw;
    return new Promise((resolve) => {
      const done = () => {
        raw.off("drain", done);
        raw.off("close", done);
        resolve();
      };
      raw.once("drain", done);
      raw.once("close", done);
    });
  }

  private markEnded(): void {
    if (this.ended) return;
    this.ended = true;
    openStreams.get(this.ctx.request.server.server)?.delete(this);
    clearInterval(this.heartbeat);
    this.wake?.();
  }
}

/** The Last-Event-ID a reconnecting client sends (several are joined, and then refused). */
export function lastEventIdHeader(ctx: BaseContext): string | undefined {
  const header = ctx.request.headers["last-event-id"];
  return Array.isArray(header) ? header.join(",") : header;
}

/**
 * Opens an event stream and runs `produce` on it until it returns or fails; then ends
 * the response. Refusals must be thrown before this (once the stream is open its status
 * is sent); a failure afterwards is logged and ends the stream, and the client resumes
 * from the last id it received.
 */
export async function serveEventStream(
  ctx: BaseContext,
  produce: (stream: SseStream) => Promise<void>,
  options: { heartbeatMs?: number } = {},
): Promise<typeof REPLY_SENT> {
  const stream = new SseStream(ctx, options.heartbeatMs);
  try {
    await produce(stream);
  } catch (error) {
    if (!stream.closed) ctx.request.log.warn({ err: error }, `${ctx.op.id} stream ended by a failure`);
  } finally {
    stream.end();
  }
  return REPLY_SENT;
}
