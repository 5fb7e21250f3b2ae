import type { HeldRegistryCredential, RegistryCredentialGrant } from "./host-protocol.js";

/**
 * Which registry credential versions attempts on this host hold right now: the host keeps a
 * tenant's credential only for the attempt that fetched it, and acknowledges to the control
 * plane that it uses nothing older than what these hold (so a prior value is removed only
 * once no attempt anywhere can still present it).
 */
export class CredentialHolds {
  readonly #byAttempt = new Map<string, HeldRegistryCredential[]>();

  hold(attemptId: string, tenant: string, grants: readonly RegistryCredentialGrant[]): void {
    this.#byAttempt.set(
      attemptId,
      grants.map((g) => ({ tenant, registry: g.registry, version: g.version })),
    );
  }

  /** Releases what the attempt held; true when it held anything. */
  release(attemptId: string): boolean {
    return this.#byAttempt.delete(attemptId);
  }

  /** The oldest version held per tenant and registry. */
  held(): HeldRegistryCredential[] {
    const oldest = new Map<string, HeldRegistryCredential>();
    for (const holds of this.#byAttempt.values()) {
      for (const h of holds) {
        const key = `${h.tenant}\u0000${h.registry}`;
        const seen = oldest.get(key);
        if (seen === undefined || h.version < seen.version) oldest.set(key, h);
      }
    }
    return [...oldest.values()];
  }
}
