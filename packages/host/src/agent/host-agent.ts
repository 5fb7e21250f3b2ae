import { type AttemptRunnerDeps, runAttempt } from "./run-attempt.js";

/**
 * The host agent loop: enrolls, then claims attempts while it has free vCPUs and runs
 * each one concurrently. `wake()` claims at once (after a submission); otherwise it
 * polls. `stop()` stops claiming and waits for running attempts.
 */
export class HostAgent {
  private running = new Set<Promise<void>>();
  /** Attempt directories still being removed; stop() waits for them too. */
  private cleanups = new Set<Promise<void>>();
  private usedVcpus = 0;
  private timer: NodeJS.Timeout | null = null;
  private claiming = false;
  private stopped = false;

  constructor(
    private readonly deps: AttemptRunnerDeps & {
      readonly vcpus: number;
      readonly memoryBytes: number;
      readonly pollMs?: number;
      /** Removes what attempts of a previous, killed agent left on this host. */
      readonly reapStale?: () => Promise<unknown>;
    },
  ) {}

  async start(): Promise<void> {
    await this.deps.reapStale?.();
    await this.deps.protocol.enroll({
      id: this.deps.hostId,
      vcpus: this.deps.vcpus,
      memoryBytes: this.deps.memoryBytes,
      isolation: this.deps.executor.isolation,
    });
    this.schedule();
  }

  wake(): void {
    void this.claim();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.claim().finally(() => this.schedule()), this.deps.pollMs ?? 500);
    this.timer.unref();
  }

  private async claim(): Promise<void> {
    if (this.claiming || this.stopped) return;
    this.claiming = true;
    try {
      while (!this.stopped) {
        const free = this.deps.vcpus - this.usedVcpus;
        if (free <= 0) break;
        const placement = await this.deps.protocol.claim(this.deps.hostId, free);
        if (placement === null) break;
        this.usedVcpus += placement.limits.vcpus;
        const task: Promise<void> = runAttempt({ ...this.deps, inBackground: (work) => this.track(work) }, placement)
          .catch(() => undefined)
          .finally(() => {
            this.usedVcpus -= placement.limits.vcpus;
            this.running.delete(task);
            this.wake();
          });
        this.running.add(task);
      }
    } catch {
      // The control plane did not answer; the next poll tries again.
    } finally {
      this.claiming = false;
    }
  }

  private track(work: Promise<void>): void {
    this.cleanups.add(work);
    void work.finally(() => this.cleanups.delete(work));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await Promise.all(this.running);
    await Promise.all(this.cleanups);
  }
}
