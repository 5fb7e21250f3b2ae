import { pipeline, type Readable, Transform } from "node:stream";
import type { Clock } from "@kiln/contract";

/** A per-tenant ingress bound: the average rate, and the bytes an idle tenant may send at full speed. */
export interface TenantIngress {
  readonly bytesPerSecond: number;
  readonly burstBytes: number;
  /** Tenants whose requests do not make the process shared for the others (see `served`). */
  readonly unsharedTenants?: readonly string[];
}

/** How long after another tenant's last request this process counts as shared (see `served`). */
export const SHARED_FOR_MS = 10_000;

/**
 * While this process serves more than one tenant, each tenant's request bodies are read at most
 * `bytesPerSecond` on average, with bursts up to `burstBytes` at full speed: a tenant sending
 * without pause (its uploads, huge manifests and submissions one after another) is slowed to its
 * share, so the bytes it makes the event loop receive, and the full collections their buffers
 * cause, stay bounded whatever it sends, and so does what it adds to other tenants' latency
 * (reliability trial T15). A tenant alone in the process is not slowed: nobody's latency is at
 * stake, and a lone upload runs at the network's speed. Nothing is refused: a body over its
 * tenant's rate is read later, by not reading its socket, and TCP slows the sender.
 *
 * The bound is a generic cell rate (GCRA): one "paid until" time per tenant, the time at which
 * its bytes so far would have been read at exactly the rate. A chunk may pass once that time is
 * at most a burst's worth ahead of now; all of a tenant's bodies share it, in the order their
 * chunks arrive. Bytes read while the tenant is alone are not charged.
 */
export class TenantIngressShaper {
  /** Per tenant: when its bytes so far are paid for at the rate, in ms since the epoch. */
  readonly #paidUntil = new Map<string, number>();
  readonly #burstMs: number;
  /** Past this many tenants remembered, those paid up are forgotten (then twice what is left, so a sweep's cost is shared by as many takes). */
  #sweepAt = 1024;
  /**
   * The last two distinct tenants served, latest first: enough to tell, for any tenant, when
   * another one was last served (the latest, or if that is itself, the one before).
   */
  #latest: { readonly tenant: string; at: number } | null = null;
  #before: { readonly tenant: string; readonly at: number } | null = null;
  readonly #unshared: ReadonlySet<string>;

  constructor(
    readonly bytesPerSecond: number,
    readonly burstBytes: number,
    private readonly clock: Clock,
    unsharedTenants: readonly string[] = [],
    readonly sharedForMs: number = SHARED_FOR_MS,
  ) {
    if (!(bytesPerSecond > 0) || !(burstBytes > 0)) {
      throw new Error(`a tenant's ingress rate and burst must be positive, got ${bytesPerSecond} and ${burstBytes}`);
    }
    this.#burstMs = (burstBytes / bytesPerSecond) * 1000;
    this.#unshared = new Set(unsharedTenants);
  }

  /**
   * Notes a request of `tenant` (any operation, once its caller is known): for `sharedForMs`
   * after it, every other tenant's bodies are read at the rate — unless `tenant` is one of the
   * bound's unshared tenants (TenantIngress.unsharedTenants), whose requests leave it as it was.
   */
  served(tenant: string): void {
    if (this.#unshared.has(tenant)) return;
    const at = this.clock.now().getTime();
    // Every request passes here: the latest tenant's repeat moves its time, allocating nothing.
    if (this.#latest?.tenant === tenant) this.#latest.at = at;
    else {
      this.#before = this.#latest;
      this.#latest = { tenant, at };
    }
  }

  /** Whether a tenant other than `tenant` made a request within `sharedForMs` of `now`. */
  sharedWith(tenant: string, now: number): boolean {
    const other = this.#latest?.tenant === tenant ? this.#before : this.#latest;
    return other !== null && now - other.at < this.sharedForMs;
  }

  /**
   * Takes `bytes` of `tenant`'s allowance and returns how many ms to wait before reading them
   * (0: now). The wait is charged even if the caller gives up, as the bytes were sent.
   */
  take(tenant: string, bytes: number): number {
    const now = this.clock.now().getTime();
    if (!this.sharedWith(tenant, now)) {
      // Alone: read now and owe nothing, so a tenant joined later finds a full burst.
      this.#paidUntil.delete(tenant);
      return 0;
    }
    const paidUntil = Math.max(this.#paidUntil.get(tenant) ?? now, now);
    const wait = Math.max(0, paidUntil - this.#burstMs - now);
    this.#paidUntil.set(tenant, paidUntil + (bytes / this.bytesPerSecond) * 1000);
    if (this.#paidUntil.size > this.#sweepAt) this.#forgetPaidUp(now);
    return wait;
  }

  /** `payload` as its tenant's bodies are read: each chunk passed on once its bytes are allowed. */
  shape(tenant: string, payload: Readable): Readable {
    const clock = this.clock;
    const shaper = this;
    const shaped = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        const wait = shaper.take(tenant, chunk.length);
        if (wait === 0) done(null, chunk);
        else clock.after(wait, () => done(null, chunk));
      },
    });
    // A client gone mid-body fails the shaped stream too, so the body's reader stops.
    return pipeline(payload, shaped, () => {});
  }

  /** Tenants remembered (for tests). */
  get tenants(): number {
    return this.#paidUntil.size;
  }

  /** Tenants whose bytes are all paid for are as if never seen. */
  #forgetPaidUp(now: number): void {
    for (const [tenant, paidUntil] of this.#paidUntil) if (paidUntil <= now) this.#paidUntil.delete(tenant);
    this.#sweepAt = Math.max(1024, 2 * this.#paidUntil.size);
  }
}
