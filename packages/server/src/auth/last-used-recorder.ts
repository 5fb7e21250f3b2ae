import { recordLastUsed, type Storage } from "@kiln/storage";
import type { Principal } from "./principal.js";

/**
 * Keeps last_used_at without a database write per request: uses are noted in memory
 * and written in one batch every `flushSeconds` (and when the app closes). The value
 * is therefore at most that stale, which is what a "last used" column promises.
 */
export class LastUsedRecorder {
  private cliTokens = new Map<string, string>();
  private agentCredentials = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly storage: Storage,
    flushSeconds = 30,
  ) {
    this.timer = setInterval(() => void this.flush().catch(() => undefined), flushSeconds * 1000);
    this.timer.unref();
  }

  note(principal: Principal, at: Date): void {
    const when = at.toISOString();
    if (principal.via.kind === "cli_token") this.cliTokens.set(principal.via.tokenId, when);
    else if (principal.via.kind === "agent_credential") this.agentCredentials.set(principal.via.tokenHash, when);
  }

  get pending(): number {
    return this.cliTokens.size + this.agentCredentials.size;
  }

  async flush(): Promise<void> {
    if (this.pending === 0) return;
    const uses = { cliTokens: this.cliTokens, agentCredentialHashes: this.agentCredentials };
    this.cliTokens = new Map();
    this.agentCredentials = new Map();
    await recordLastUsed(this.storage, uses);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
