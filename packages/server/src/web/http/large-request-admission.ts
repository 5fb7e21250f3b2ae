import type { FastifyRequest } from "fastify";
import { refuse } from "../../domain/refusal.js";

/** How long a tenant refused a large request is told to wait: about one large body's reading. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Whether a request's body is large: declared above `threshold` bytes, or not declared at all
 * (a chunked body could be any size up to the operation's limit).
 */
export function declaresLargeBody(request: FastifyRequest, threshold: number): boolean {
  const length = request.headers["content-length"];
  if (length === undefined) return request.headers["transfer-encoding"] !== undefined;
  const bytes = Number(length);
  return !Number.isFinite(bytes) || bytes > threshold;
}

/**
 * At most `perTenant` large requests of one tenant in this process at once, from the moment its
 * caller is known until its answer is sent: a tenant's large bodies take the body workers and
 * their answers take the event loop in turn with everyone else's, and a tenant that sends more
 * at once than this is refused `rate_limited` (each operation with a large body lists it) with
 * `retry_after_seconds`, before its body is read. A bound per process, not per deployment: it
 * protects this process's event loop and workers, which are what a noisy tenant's bodies take.
 */
export class LargeRequestAdmission {
  readonly #inFlight = new Map<string, number>();

  constructor(readonly perTenant: number) {
    if (!Number.isInteger(perTenant) || perTenant < 1) {
      throw new Error(`the large-request bound per tenant must be at least 1, got ${perTenant}`);
    }
  }

  /**
   * Counts one large request of `tenant` until `release` is called (once; later calls do
   * nothing), or refuses rate_limited when the tenant already has its bound in flight.
   */
  admit(tenant: string, now: Date, what: string): () => void {
    const current = this.#inFlight.get(tenant) ?? 0;
    if (current >= this.perTenant) {
      refuse(
        "rate_limited",
        `${what}: this tenant already has ${current} large requests being read or performed on this server (at most ${this.perTenant} at once); send the next when one has answered`,
        {
          reset_at: new Date(now.getTime() + RETRY_AFTER_SECONDS * 1000).toISOString(),
          retry_after_seconds: RETRY_AFTER_SECONDS,
        },
      );
    }
    this.#inFlight.set(tenant, current + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#inFlight.get(tenant) ?? 1) - 1;
      if (left <= 0) this.#inFlight.delete(tenant);
      else this.#inFlight.set(tenant, left);
    };
  }

  /** Large requests of `tenant` in flight now (for tests and the operator's view). */
  inFlight(tenant: string): number {
    return this.#inFlight.get(tenant) ?? 0;
  }
}
