import type { Clock } from "@kiln/contract";
import type { JobNotifications } from "@kiln/storage";

/**
 * How often a waiting claim reads the queue again without a notice while notices arrive: only
 * for what no notice announces — time passing (a job's wait for its lineage's host ends, that
 * host stops being seen) and a notice lost without the connection being seen lost. Each read is
 * a claim, which also records the waiting host as seen (claim-next-job.ts), well within
 * HOST_FRESH_SECONDS: an idle host waiting here stays a live lineage host.
 */
export const CLAIM_RECHECK_MS = 5_000;

/**
 * How often a waiting claim reads the queue while notices do not arrive (KILN_NOTIFICATIONS=off,
 * or the listening connection is being re-made): a host's poll interval before the long-poll.
 */
export const CLAIM_FAST_POLL_MS = 500;

/**
 * The waiting side of long-poll claims (HostService.answerClaim): each waiting claim subscribes
 * to the notices that can make a queued job placeable (`onClaimable`) before it first reads the
 * queue, so a commit after that read always wakes it; between notices it waits on the control
 * plane's clock. `close()` ends every wait (the listener is shutting down) and makes later ones
 * answer at once.
 */
export class ClaimWaits {
  #closed = false;
  readonly #open = new Set<ClaimWaiter>();

  constructor(private readonly deps: { readonly clock: Clock; readonly notifications?: JobNotifications }) {}

  get closed(): boolean {
    return this.#closed;
  }

  /** A waiter subscribed from now on; resolves once notices are heard (or listening has failed). */
  async open(): Promise<ClaimWaiter> {
    const waiter = new ClaimWaiter(this.deps, () => this.#open.delete(waiter));
    this.#open.add(waiter);
    if (this.#closed) waiter.wake();
    await this.deps.notifications?.ready();
    return waiter;
  }

  /** Ends every wait under way; every later wait ends at once. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#open) waiter.wake();
  }
}

/** One claim's wake-ups: a notice, the clock, its requester gone, or the waits closed. */
export class ClaimWaiter {
  #woken = false;
  #resolve: (() => void) | null = null;
  readonly #unsubscribe: () => void;

  constructor(
    private readonly deps: { readonly clock: Clock; readonly notifications?: JobNotifications },
    private readonly onDispose: () => void,
  ) {
    this.#unsubscribe = deps.notifications?.onClaimable(() => this.wake()) ?? (() => {});
  }

  wake(): void {
    this.#woken = true;
    this.#resolve?.();
  }

  /** Forgets earlier wake-ups: called just before the queue is read, so a later commit wakes again. */
  reset(): void {
    this.#woken = false;
  }

  /** How long to wait before reading anyway: the fallback while notices arrive, else the fast poll. */
  pollMs(): number {
    return this.deps.notifications?.listening === true ? CLAIM_RECHECK_MS : CLAIM_FAST_POLL_MS;
  }

  /** Resolves at a wake-up since the last reset (at once if one came), after `ms`, or once `signal` aborts. */
  next(ms: number, signal: AbortSignal): Promise<void> {
    if (this.#woken || signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = this.deps.clock.after(ms, () => done());
      const done = () => {
        timer.cancel();
        signal.removeEventListener("abort", done);
        this.#resolve = null;
        resolve();
      };
      signal.addEventListener("abort", done, { once: true });
      this.#resolve = done;
    });
  }

  dispose(): void {
    this.#unsubscribe();
    this.#resolve?.();
    this.onDispose();
  }
}
