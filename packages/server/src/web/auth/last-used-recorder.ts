import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import { recordLastUsed, type Storage } from "@kiln/storage";
import type { Principal } from "../../domain/identity/principal.js";

/** Credential key (CLI token id, agent credential hash) → time of its latest use, ISO text. */
type Uses = Map<string, string>;
interface Batch {
  readonly cliTokens: Uses;
  readonly agentCredentials: Uses;
}

/**
 * Keeps last_used_at without a database write per request: uses are noted in memory
 * and written in one batch every `flushSeconds` (and when the app closes). The stored
 * value is therefore at most that stale; reads in this process see the uses it has not
 * written yet through `pendingCliTokenUse` / `pendingAgentCredentialUse`.
 */
export class LastUsedRecorder {
  private cliTokens: Uses = new Map();
  private agentCredentials: Uses = new Map();
  /** Batches being written: still pending to a reader until their write has finished. */
  private readonly writing = new Set<Batch>();
  private readonly loop: PeriodicLoop;

  constructor(
    private readonly storage: Storage,
    options: {
      readonly clock: Clock;
      readonly log: Logger;
      readonly onFailure?: (failure: LoopFailure) => void;
      readonly flushSeconds?: number;
    },
  ) {
    // A failed write is logged and emitted; its uses stay pending and go with the next batch.
    this.loop = startPeriodicLoop({
      name: "last-used recorder",
      clock: options.clock,
      everyMs: (options.flushSeconds ?? 30) * 1000,
      run: () => this.flush(),
      log: options.log,
      ...(options.onFailure === undefined ? {} : { onFailure: options.onFailure }),
    });
  }

  note(principal: Principal, at: Date): void {
    const when = at.toISOString();
    if (principal.via.kind === "cli_token") this.cliTokens.set(principal.via.tokenId, when);
    else if (principal.via.kind === "agent_credential") this.agentCredentials.set(principal.via.tokenHash, when);
  }

  get pending(): number {
    return this.cliTokens.size + this.agentCredentials.size;
  }

  /** The latest use of the CLI token `id` this process noted but has not written, as ISO text. */
  pendingCliTokenUse(id: string): string | undefined {
    return this.latestPending(id, (batch) => batch.cliTokens);
  }

  /** The latest unwritten use of the agent credential whose value hashes to `tokenHash`. */
  pendingAgentCredentialUse(tokenHash: string): string | undefined {
    return this.latestPending(tokenHash, (batch) => batch.agentCredentials);
  }

  private latestPending(key: string, usesOf: (batch: Batch) => Uses): string | undefined {
    let latest: string | undefined;
    const current = { cliTokens: this.cliTokens, agentCredentials: this.agentCredentials };
    for (const batch of [current, ...this.writing]) {
      const at = usesOf(batch).get(key);
      if (at !== undefined && (latest === undefined || Date.parse(at) > Date.parse(latest))) latest = at;
    }
    return latest;
  }

  async flush(): Promise<void> {
    if (this.pending === 0) return;
    const batch: Batch = { cliTokens: this.cliTokens, agentCredentials: this.agentCredentials };
    this.writing.add(batch);
    this.cliTokens = new Map();
    this.agentCredentials = new Map();
    try {
      await recordLastUsed(this.storage, { cliTokens: batch.cliTokens, agentCredentialHashes: batch.agentCredentials });
    } catch (error) {
      // Not lost: a later use of the same credential is newer and wins the merge.
      for (const [key, at] of batch.cliTokens) if (!this.cliTokens.has(key)) this.cliTokens.set(key, at);
      for (const [key, at] of batch.agentCredentials) {
        if (!this.agentCredentials.has(key)) this.agentCredentials.set(key, at);
      }
      throw error;
    } finally {
      this.writing.delete(batch);
    }
  }

  async close(): Promise<void> {
    await this.loop.stop();
    await this.flush();
  }
}

/** The later of a stored last_used_at and a pending use (either may be absent). */
export function latestUse(stored: string | null, pending: string | undefined): string | null {
  if (pending === undefined) return stored;
  if (stored === null) return pending;
  return Date.parse(pending) > Date.parse(stored) ? pending : stored;
}
