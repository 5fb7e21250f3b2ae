import type { JobNotifications, Wake } from "@kiln/storage";
import type { AppDeps } from "../../http/app-deps.js";
import type { SseStream } from "../../http/sse-stream.js";

/**
 * How often a stream reads again without a notice while notices arrive. Only a safety net: a
 * notice lost without the connection being seen lost (a half-open TCP connection, until
 * keepalive finds it) or, on SQLite, a write of another process is seen within this. While the
 * listening connection is known lost, streams poll at their own fast rate instead.
 */
export const STREAM_FALLBACK_POLL_MS = 5_000;

/**
 * A stream's subscription to the notices that concern it, made before its first read so that a
 * commit between that read and the stream's first wait is not missed: a notice that arrives
 * before the stream exists is kept and delivered as a nudge when it is attached.
 */
export class StreamWakes {
  #stream: SseStream | null = null;
  #missed = false;
  readonly #unsubscribe: () => void;

  private constructor(
    private readonly notifications: JobNotifications,
    subscribe: (notifications: JobNotifications, wake: Wake) => () => void,
  ) {
    this.#unsubscribe = subscribe(notifications, () => {
      if (this.#stream === null) this.#missed = true;
      else this.#stream.nudge();
    });
  }

  /**
   * Subscribes, then waits until notices are being received (or the attempt to listen ended
   * without: the stream then polls fast), so nothing committed after this resolves is missed.
   */
  static async open(
    deps: AppDeps,
    subscribe: (notifications: JobNotifications, wake: Wake) => () => void,
  ): Promise<StreamWakes> {
    const notifications = deps.notifications;
    if (notifications === undefined) throw new Error("buildApp always provides notifications");
    const wakes = new StreamWakes(notifications, subscribe);
    await notifications.ready();
    return wakes;
  }

  /** From now on notices nudge `stream` (one that came meanwhile nudges it at once). */
  attach(stream: SseStream): void {
    this.#stream = stream;
    if (this.#missed) {
      this.#missed = false;
      stream.nudge();
    }
  }

  /** How long to wait for a notice before reading anyway: the fallback while listening, else `fastMs`. */
  pollMs(fastMs: number): number {
    return this.notifications.listening ? STREAM_FALLBACK_POLL_MS : fastMs;
  }

  close(): void {
    this.#unsubscribe();
  }
}
