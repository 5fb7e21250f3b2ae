/**
 * One request start per tenant per turn of the event loop: a tenant with many requests ready at
 * once (a flood of jobs.list pages on 50 connections) has them started one a turn, in the order
 * they came, while every other tenant's request that arrives meanwhile starts in the turn it
 * arrives in. Without it, one turn's poll phase runs every ready request to its answer (on SQLite
 * the driver is synchronous, so a request runs from its read to its answer without yielding), and
 * a quiet tenant's request waits behind the whole batch (issue 33: behind 41 of a flood's answers
 * at the median; docs/benchmarks.md). Nothing is refused and nothing waits on a timer: a held
 * request starts in the check phase of a later turn, after the poll phase has started everyone
 * else's; so a lone tenant loses only the cost of a loop turn per request.
 *
 * Each tenant that started a request this turn has a queue (empty unless it is flooding); its
 * turn ends in the check phase (setImmediate), which starts the queue's head and, if any request
 * is left, ends the next turn likewise. Memory is one entry per tenant with a start this turn.
 */
export class TenantTurns {
  /** Per tenant that started a request in this turn: its requests held for later turns, in order. */
  readonly #held = new Map<string, (() => void)[]>();

  /**
   * Resolves when `tenant` may start its request: at once (`null`) if it has started none in this
   * turn, else a promise resolved in the turn its place comes.
   */
  take(tenant: string): Promise<void> | null {
    const held = this.#held.get(tenant);
    if (held !== undefined) return new Promise<void>((start) => held.push(start));
    this.#held.set(tenant, []);
    setImmediate(() => this.#endTurn(tenant));
    return null;
  }

  /** Tenants with a start in this turn or requests held (for tests). */
  get tenants(): number {
    return this.#held.size;
  }

  #endTurn(tenant: string): void {
    const held = this.#held.get(tenant);
    const next = held?.shift();
    if (held === undefined || next === undefined) {
      this.#held.delete(tenant);
      return;
    }
    // The head starts now (its handler runs in this callback's microtasks); the next turn is its.
    next();
    setImmediate(() => this.#endTurn(tenant));
  }
}
