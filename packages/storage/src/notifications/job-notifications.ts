import { type Clock, type Logger, messageOf, type Timer } from "@kiln/contract";
import type { Storage } from "../dialect.js";
import { JOB_CHANNELS } from "./job-notices.js";
import type { NoticeConnection } from "./notice-connection.js";

/** What the notification port reports besides logging it: the listening end's losses and recoveries. */
export type JobNotificationEvent =
  | { readonly type: "notifications:lost"; readonly error: unknown }
  | { readonly type: "notifications:listen-failed"; readonly error: unknown; readonly retryInMs: number }
  | { readonly type: "notifications:restored"; readonly backendPid: number | null };

/** A waiter's wake-up: look again (the database says what changed). */
export type Wake = () => void;

/**
 * This process's subscriptions to what other writers commit (job-notices.ts): log streams wait
 * on a job, event streams on a tenant's job events, a host's claim wait on newly queued jobs
 * and on whatever else can make a queued job placeable.
 * A notice only wakes; every waiter re-reads the database, and keeps a slow poll of its own
 * for notices that never arrive — those committed while the listening connection was down
 * (between the loss and the new LISTEN nothing is delivered, and PostgreSQL keeps nothing for
 * a session that is gone) or, on SQLite, by another process.
 */
export interface JobNotifications {
  /**
   * Whether notices arrive now. While false (the connection was lost and is being re-made),
   * waiters poll at their fast rate, as they did before notifications existed.
   */
  readonly listening: boolean;
  /**
   * Starts listening if nothing has yet and resolves once the attempt has ended, listening or
   * not: a waiter that subscribed and then awaited this misses no notice committed after it.
   */
  ready(): Promise<void>;
  /** Wakes on each change of the job's log or status. Returns the unsubscribe. */
  onJob(jobId: string, wake: Wake): () => void;
  /** Wakes on each change of any job, with its id, or null when anything may have changed (a recovery). */
  onAnyJob(wake: (jobId: string | null) => void): () => void;
  /** Wakes on each job event appended for the tenant. */
  onJobEvents(tenantId: string, wake: Wake): () => void;
  /** Wakes whenever a job becomes queued. */
  onQueued(wake: Wake): () => void;
  /**
   * Wakes whenever a queued job may have become placeable: a job queued, or a placement notice
   * (a host's state, a tenant's slot or controls changed). What hosts waiting to claim wait on.
   */
  onClaimable(wake: Wake): () => void;
  /** Stops listening and any reconnection; subscriptions are no longer woken. */
  stop(): Promise<void>;
}

export interface JobNotificationsOptions {
  readonly clock: Clock;
  readonly log: Logger;
  readonly onEvent?: (event: JobNotificationEvent) => void;
  /** How long to wait between attempts to listen again after one failed (default 5 s). */
  readonly retryMs?: number;
  /**
   * false: never listen, so every waiter polls at its fast rate (KILN_NOTIFICATIONS=off, for a
   * connection pooler that cannot hold a LISTEN session, and the polling baseline of
   * bench/stream-latency.mjs). Default true.
   */
  readonly enabled?: boolean;
}

/** Between listen attempts after a failure: short enough that streams are back to waking soon. */
export const LISTEN_RETRY_MS = 5_000;

const CHANNELS = Object.values(JOB_CHANNELS);

/**
 * The notification port over `storage.listen`: one listening end for the whole process,
 * opened at the first subscription (most processes that never stream never open one). When
 * the connection is lost the loss is logged and emitted, every waiter is woken (it re-reads
 * and falls back to its fast poll while `listening` is false), and listening is re-made at once
 * and then every `retryMs` on the clock until it succeeds, each failure logged and emitted;
 * once listening again, every waiter is woken once more, since what was committed in between
 * was never announced.
 */
export function startJobNotifications(storage: Storage, options: JobNotificationsOptions): JobNotifications {
  return new ListeningPort(storage, options);
}

class ListeningPort implements JobNotifications {
  readonly #storage: Storage;
  readonly #options: JobNotificationsOptions;
  readonly #jobs = new Map<string, Set<Wake>>();
  readonly #tenants = new Map<string, Set<Wake>>();
  readonly #anyJob = new Set<(jobId: string | null) => void>();
  readonly #queued = new Set<Wake>();
  readonly #claimable = new Set<Wake>();
  #state: "idle" | "connecting" | "listening" | "lost" | "stopped" = "idle";
  #connection: NoticeConnection | null = null;
  #attempt: Promise<void> | null = null;
  #retry: Timer | null = null;
  /** Whether a connection was ever lost: a later success is a recovery, reported and woken for. */
  #recovering = false;

  constructor(storage: Storage, options: JobNotificationsOptions) {
    this.#storage = storage;
    this.#options = options;
  }

  get listening(): boolean {
    return this.#state === "listening";
  }

  ready(): Promise<void> {
    this.#started();
    return this.#attempt ?? Promise.resolve();
  }

  onJob(jobId: string, wake: Wake): () => void {
    return this.#add(this.#jobs, jobId, wake);
  }

  onAnyJob(wake: (jobId: string | null) => void): () => void {
    this.#started();
    this.#anyJob.add(wake);
    return () => {
      this.#anyJob.delete(wake);
    };
  }

  onJobEvents(tenantId: string, wake: Wake): () => void {
    return this.#add(this.#tenants, tenantId, wake);
  }

  onQueued(wake: Wake): () => void {
    this.#started();
    this.#queued.add(wake);
    return () => {
      this.#queued.delete(wake);
    };
  }

  onClaimable(wake: Wake): () => void {
    this.#started();
    this.#claimable.add(wake);
    return () => {
      this.#claimable.delete(wake);
    };
  }

  async stop(): Promise<void> {
    this.#state = "stopped";
    this.#retry?.cancel();
    await this.#attempt;
    const connection = this.#connection;
    this.#connection = null;
    await connection?.close();
  }

  #started(): void {
    if (this.#state === "idle" && this.#options.enabled !== false) this.#listen();
  }

  #add(map: Map<string, Set<Wake>>, key: string, wake: Wake): () => void {
    this.#started();
    let set = map.get(key);
    if (set === undefined) {
      set = new Set();
      map.set(key, set);
    }
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0) map.delete(key);
    };
  }

  /** One attempt to listen; on failure the next is scheduled. At most one attempt at a time. */
  #listen(): void {
    if (this.#attempt !== null || this.#state === "stopped") return;
    this.#retry?.cancel();
    this.#retry = null;
    this.#state = "connecting";
    this.#attempt = this.#storage
      .listen(CHANNELS, {
        onNotice: (channel, payload) => this.#deliver(channel, payload),
        onLost: (error) => this.#lost(error),
      })
      .then(
        async (connection) => {
          if (this.#state === "stopped") {
            await connection.close();
            return;
          }
          this.#connection = connection;
          this.#state = "listening";
          if (this.#recovering) {
            this.#recovering = false;
            this.#options.log.info(
              { backendPid: connection.backendPid },
              "notifications: listening again; every waiter reads once for what was committed meanwhile",
            );
            this.#options.onEvent?.({ type: "notifications:restored", backendPid: connection.backendPid });
            this.#wakeAll();
          }
        },
        (error: unknown) => {
          if (this.#state === "stopped") return;
          this.#state = "lost";
          this.#recovering = true;
          const retryInMs = this.#options.retryMs ?? LISTEN_RETRY_MS;
          this.#options.log.error(
            { err: error, retryInMs },
            `notifications: could not listen (${messageOf(error)}); waiters poll, trying again in ${retryInMs} ms`,
          );
          this.#options.onEvent?.({ type: "notifications:listen-failed", error, retryInMs });
          this.#retry = this.#options.clock.after(retryInMs, () => this.#listen());
        },
      )
      .finally(() => {
        this.#attempt = null;
      });
  }

  #lost(error: Error): void {
    if (this.#state === "stopped") return;
    this.#connection = null;
    this.#state = "lost";
    this.#recovering = true;
    this.#options.log.error(
      { err: error },
      `notifications: the listening connection was lost (${error.message}); waiters poll until it is back`,
    );
    this.#options.onEvent?.({ type: "notifications:lost", error });
    this.#wakeAll();
    this.#listen();
  }

  #deliver(channel: string, payload: string): void {
    if (this.#state === "stopped") return;
    if (channel === JOB_CHANNELS.job) {
      this.#wakeEach(this.#jobs.get(payload));
      for (const wake of [...this.#anyJob]) this.#call(() => wake(payload));
    } else if (channel === JOB_CHANNELS.jobEvents) {
      this.#wakeEach(this.#tenants.get(payload));
    } else if (channel === JOB_CHANNELS.queued) {
      this.#wakeEach(this.#queued);
      this.#wakeEach(this.#claimable);
    } else if (channel === JOB_CHANNELS.placement) {
      this.#wakeEach(this.#claimable);
    }
  }

  #wakeAll(): void {
    for (const set of this.#jobs.values()) this.#wakeEach(set);
    for (const set of this.#tenants.values()) this.#wakeEach(set);
    this.#wakeEach(this.#queued);
    this.#wakeEach(this.#claimable);
    for (const wake of [...this.#anyJob]) this.#call(() => wake(null));
  }

  #wakeEach(set: Set<Wake> | undefined): void {
    if (set === undefined) return;
    for (const wake of [...set]) this.#call(wake);
  }

  /** A waiter that throws is logged; it does not keep the others from waking. */
  #call(wake: () => void): void {
    try {
      wake();
    } catch (error) {
      this.#options.log.error({ err: error }, `notifications: a waiter failed on waking: ${messageOf(error)}`);
    }
  }
}
