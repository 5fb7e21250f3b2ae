import { readdir, rm, statfs, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { messageOf } from "@kiln/contract";
import type { LedgerEntry, RecoveryProvider, RecoveryRequest, StepResult } from "./recovery-provider.js";
import type { ServiceSupervisor } from "./service-supervisor.js";

/**
 * The `local` provider: recovers the kiln-host on this machine without touching its disks —
 * read the boot's journal first when asked (`rescue_read`), restart the kiln-host service,
 * clear scratch and stale attempt directories, re-run initialization's checks. No step is
 * destructive: root and /srv are preserved, as the confirmation says.
 */
export class LocalRecoveryProvider implements RecoveryProvider {
  readonly kind = "local" as const;
  readonly installation = null;

  constructor(
    private readonly options: {
      supervisor: ServiceSupervisor;
      /** The kiln-host's data dir: `attempts/` holds attempt directories. */
      dataDir: string;
      /** Scratch roots to clear (e.g. the tmpfs attempts' workspaces live in). */
      scratchRoots?: readonly string[];
      /** Initialization refuses a disk with less free than this fraction (default 0.05). */
      minimumFreeFraction?: number;
    },
  ) {}

  get serviceName(): string {
    return this.options.supervisor.serviceName;
  }

  async identityReadable(): Promise<boolean> {
    // The local provider acts through the process it supervises; it holds no provider identity.
    return true;
  }

  plan(request: RecoveryRequest): string[] {
    return [
      ...(request.rescueRead ? ["read_journal"] : []),
      "restart_service",
      "clear_scratch",
      "rerun_initialization",
    ];
  }

  needed(_step: string, _ledger: readonly LedgerEntry[]): boolean {
    return true;
  }

  async runStep(step: string, _request: RecoveryRequest): Promise<StepResult> {
    switch (step) {
      case "read_journal":
        return this.#readJournal();
      case "restart_service":
        await this.options.supervisor.restart();
        return { outcome: "succeeded", detail: `${this.serviceName} restarted and reported to the control plane` };
      case "clear_scratch":
        return this.#clearScratch();
      case "rerun_initialization":
        return this.#rerunInitialization();
      default:
        return { outcome: "failed", detail: `the local provider has no step ${step}` };
    }
  }

  #readJournal(): StepResult {
    const lines = this.options.supervisor.journal();
    const tail = lines.slice(-20).join("\n");
    return {
      outcome: "succeeded",
      detail: `${lines.length} journal line(s) read; last: ${tail.slice(-3500) || "(empty)"}`,
    };
  }

  async #clearScratch(): Promise<StepResult> {
    // Only while the service is stopped or between attempts would this be safe in general; the
    // recovery runs it right after a restart, when the fresh kiln-host has claimed nothing yet
    // of what these directories hold (its attempts are new directories).
    let removed = 0;
    const attempts = join(this.options.dataDir, "attempts");
    for (const root of [attempts, ...(this.options.scratchRoots ?? [])]) {
      const entries = await readdir(root).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return [] as string[];
        throw error;
      });
      for (const entry of entries) {
        await rm(join(root, entry), { recursive: true, force: true });
        removed += 1;
      }
    }
    return {
      outcome: "succeeded",
      detail: `${removed} stale attempt or scratch entr${removed === 1 ? "y" : "ies"} removed`,
    };
  }

  async #rerunInitialization(): Promise<StepResult> {
    const failures: string[] = [];
    const probe = join(this.options.dataDir, `.recovery-probe-${process.pid}`);
    try {
      await writeFile(probe, "probe");
      await unlink(probe);
    } catch (error) {
      failures.push(`data dir not writable: ${messageOf(error)}`);
    }
    try {
      const fs = await statfs(this.options.dataDir);
      const fraction = Number(fs.bavail) / Number(fs.blocks);
      const minimum = this.options.minimumFreeFraction ?? 0.05;
      if (fraction < minimum) failures.push(`disk ${(fraction * 100).toFixed(2)} % free, below ${minimum * 100} %`);
    } catch (error) {
      failures.push(`disk unreadable: ${messageOf(error)}`);
    }
    if (!this.options.supervisor.running()) failures.push(`${this.serviceName} is not running`);
    return failures.length === 0
      ? { outcome: "succeeded", detail: "data dir writable, disk free above bound, service running" }
      : { outcome: "failed", detail: failures.join("; ") };
  }
}
