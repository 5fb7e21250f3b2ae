import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { CLAIM_MAX_WAIT_MS, messageOf, type PeriodicLoop, startPeriodicLoop, type Timer } from "@kiln/contract";
import type { AttemptRunnerDeps } from "./attempt/attempt-context.js";
import { runAttempt } from "./attempt/run-attempt.js";
import { CredentialHolds } from "./credential-holds.js";
import { type AttemptDiskReservation, diskHeadroom } from "./disk-headroom.js";
import { FleetChannel } from "./fleet-channel.js";
import type { Placement } from "./host-protocol.js";
import type { HostReads } from "./host-reads.js";

/** An attempt's directory in the work root, named by its attempt id (`<job>-a<n>`). */
const ATTEMPT_DIRECTORY = /^[A-Za-z0-9_.-]{1,200}-a[1-9][0-9]{0,8}$/;

/** How often the host acknowledges registry credential versions when nothing else prompts it. */
const ACKNOWLEDGE_EVERY_MS = 60_000;

/**
 * The host agent loop: enrolls, then claims attempts while it has free vCPUs and runs
 * each one concurrently. Where the protocol's binding offers the long-poll claim (a remote
 * host over HTTP), the agent keeps one waiting claim open with the control plane, which answers
 * it the moment a job it can take is queued — and asks again at once when a wait ends empty; it
 * falls back to its clock's poll only when told the host takes no work now (drained) or a claim
 * failed. Otherwise (the embedded host, woken by notifications through `wake()`) it polls on its
 * clock. `stop()` stops claiming and waits for running attempts. Every failure — a claim the
 * control plane did not answer, an attempt that ended in an error — is logged and emitted
 * through `reporting`; the loop goes on.
 */
export class HostAgent {
  private running = new Set<Promise<void>>();
  /** Attempt directories still being removed; stop() waits for them too. */
  private cleanups = new Set<Promise<void>>();
  private usedVcpus = 0;
  private timer: Timer | null = null;
  /** The claim loop under way, if any: one at a time. */
  private claimRun: Promise<void> | null = null;
  /** A wake that arrived while a claim was under way: that claim may have missed its job. */
  private wokenWhileClaiming = false;
  /** The long-poll claim waiting now: the free vCPUs it asked for, and how to take it back. */
  private waiting: { readonly freeVcpus: number; readonly withdraw: AbortController } | null = null;
  private stopped = false;
  private readonly holds: CredentialHolds;
  private acknowledging: PeriodicLoop | null = null;
  /** The attempt ids (`<job>-a<n>`) this agent runs a sandbox for, as its fleet poll reports them. */
  private readonly sandboxes = new Set<string>();
  /** What each running attempt may write to the host's disk, by attempt id (executors with a disk quota). */
  private readonly diskReservations = new Map<string, AttemptDiskReservation>();
  /** The disk headroom last said in the log. */
  private diskNote: string | null = null;
  private fleet: FleetChannel | null = null;

  constructor(
    private readonly deps: AttemptRunnerDeps & {
      readonly vcpus: number;
      readonly memoryBytes: number;
      readonly pollMs?: number;
      /** How long a long-poll claim asks the control plane to wait (default CLAIM_MAX_WAIT_MS, its bound). */
      readonly claimWaitMs?: number;
      /** Removes what attempts of a previous, killed agent left on this host (the isolation's reapStale), before enrolling. */
      readonly reapStale?: boolean;
      /** Runs operator-started initializations (the isolation's steps) and operator reads on this host (issue 17); absent, the agent polls for none. */
      readonly fleet?: boolean;
      /** Answers operators' reads of this host (journal, kernel log, evidence files). */
      readonly hostReads?: HostReads;
      /** The toolchain names this host admits, advertised at enrollment; absent, none are advertised. */
      readonly toolchainNames?: () => Promise<readonly string[]>;
    },
  ) {
    this.holds = deps.credentialHolds ?? new CredentialHolds();
  }

  async start(): Promise<void> {
    const { isolation } = this.deps;
    const where = {
      workRoot: this.deps.workRoot,
      ...(this.deps.scratchRoot === undefined ? {} : { scratchRoot: this.deps.scratchRoot }),
    };
    if (this.deps.reapStale === true) {
      await isolation.reapStale(where);
      // Kept target disks a previous agent left: those of live lineages are adopted by their next attempt.
      await isolation.releaseKeptDisks?.([]);
    }
    await this.deps.protocol.enroll({
      id: this.deps.hostId,
      vcpus: this.deps.vcpus,
      memoryBytes: this.deps.memoryBytes,
      isolation: isolation.choice.isolation,
      isolationReason: isolation.choice.reason,
      ...(this.deps.toolchainNames === undefined ? {} : { toolchains: [...(await this.deps.toolchainNames())] }),
    });
    // Registry credentials: acknowledge now (a new host holds nothing), then periodically and
    // whenever an attempt that held some ends, so prior values are removed promptly.
    this.acknowledging = startPeriodicLoop({
      name: "registry credential acknowledgement",
      clock: this.deps.clock,
      everyMs: ACKNOWLEDGE_EVERY_MS,
      log: this.deps.reporting.log,
      onFailure: this.deps.reporting.emit,
      run: () => this.deps.protocol.acknowledgeCredentials(this.deps.hostId, this.holds.held()),
    });
    this.acknowledging.nudge();
    if (this.deps.fleet === true) {
      this.fleet = new FleetChannel({
        ...this.deps,
        steps: isolation.initializationSteps,
        sandboxes: () => this.sandboxesOnHost(),
        running: () => [...this.sandboxes],
        ...(this.deps.hostReads === undefined ? {} : { reads: this.deps.hostReads }),
        reaper: isolation.reaper(where),
      });
      this.fleet.start();
    }
    this.schedule();
    // A long-poll claim waits for work from the start, on no clock of its own.
    if (this.deps.protocol.claimWaiting !== undefined) void this.claim();
  }

  /**
   * Claims at once (after a submission, or when an attempt ended and freed vCPUs). While a
   * long-poll claim waits, the control plane wakes it for new work itself: it is only taken back
   * (and asked again) when more vCPUs are free than it asked for.
   */
  wake(): void {
    const waiting = this.waiting;
    if (waiting !== null) {
      if (this.deps.vcpus - this.usedVcpus > waiting.freeVcpus) waiting.withdraw.abort();
      return;
    }
    void this.claim();
  }

  /** vCPUs held by running attempts. */
  get busyVcpus(): number {
    return this.usedVcpus;
  }

  /** The poll: a claim every pollMs on the clock, none while one is under way (a long-poll waits). */
  private schedule(): void {
    if (this.stopped) return;
    this.timer?.cancel();
    this.timer = this.deps.clock.after(
      this.deps.pollMs ?? 500,
      () => void (this.claimRun ?? this.claim()).finally(() => this.schedule()),
    );
  }

  private claim(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.claimRun !== null) {
      // Not dropped: the claim under way may have read the queue before this job was in it,
      // and the job would then wait for the next poll.
      this.wokenWhileClaiming = true;
      return this.claimRun;
    }
    this.wokenWhileClaiming = false;
    const run = this.claimWhileFree().finally(() => {
      this.claimRun = null;
      if (this.wokenWhileClaiming) void this.claim();
    });
    this.claimRun = run;
    return run;
  }

  /**
   * The largest disk quota the host can grant one more attempt, for the claim (AttemptClaim's
   * freeDiskBytes); undefined when disk does not limit it: the executor writes nothing to the
   * host's disk, or the free space covers the most it grants any attempt.
   */
  private async freeDiskBytes(): Promise<number | undefined> {
    const policy = this.deps.isolation.executor.disk;
    if (policy === undefined) return undefined;
    const headroom = await diskHeadroom(this.deps.workRoot, this.diskReservations.values());
    const limited = policy.maxAttemptBytes === null || headroom < policy.maxAttemptBytes;
    // Said when its whole GiB change (attempts starting and ending, lineages saved): a host whose
    // disk holds no size's quota claims nothing, and the operator reads why here.
    const note = limited
      ? `disk: ${Math.floor(headroom / 2 ** 30)} GiB free for new attempts (the volume's free space less what ${this.diskReservations.size} running attempt(s) may still write); sizes with a larger disk quota are not claimed`
      : null;
    if (note !== this.diskNote && note !== null)
      this.deps.reporting.log.info({ host: this.deps.hostId, headroom }, note);
    this.diskNote = note;
    return limited ? headroom : undefined;
  }

  /**
   * The next placement that fits `free` vCPUs and `freeDisk` bytes: over the long-poll where the
   * binding offers it ("again": ask again at once — the wait ended empty, or it was taken back for
   * more vCPUs), else one immediate claim. null: nothing now; the poll asks again.
   */
  private async nextPlacement(free: number, freeDisk: number | undefined): Promise<Placement | null | "again"> {
    const protocol = this.deps.protocol;
    if (protocol.claimWaiting === undefined) return protocol.claim(this.deps.hostId, free, freeDisk);
    const withdraw = new AbortController();
    this.waiting = { freeVcpus: free, withdraw };
    try {
      const answer = await protocol.claimWaiting(
        {
          hostId: this.deps.hostId,
          freeVcpus: free,
          ...(freeDisk === undefined ? {} : { freeDiskBytes: freeDisk }),
          waitMs: this.deps.claimWaitMs ?? CLAIM_MAX_WAIT_MS,
        },
        withdraw.signal,
      );
      if (answer.placement !== null) return answer.placement;
      // not_admitting (drained) and not_waiting: the poll asks again; an empty wait asks at once.
      return answer.idle === "wait_ended" ? "again" : null;
    } catch (error) {
      // Taken back before any answer began to arrive (more vCPUs freed, or stopping): nothing was placed.
      if (withdraw.signal.aborted) return "again";
      throw error;
    } finally {
      this.waiting = null;
    }
  }

  private async claimWhileFree(): Promise<void> {
    try {
      while (!this.stopped) {
        const free = this.deps.vcpus - this.usedVcpus;
        if (free <= 0) break;
        const placement = await this.nextPlacement(free, await this.freeDiskBytes());
        if (placement === "again") continue;
        if (placement === null) break;
        this.usedVcpus += placement.limits.vcpus;
        const { jobId, attempt } = placement;
        this.sandboxes.add(`${jobId}-a${attempt}`);
        this.reserveDisk(`${jobId}-a${attempt}`, placement);
        const task: Promise<void> = runAttempt(
          { ...this.deps, credentialHolds: this.holds, inBackground: (work) => this.track(work) },
          placement,
        )
          .then(
            (end) => this.deps.reporting.emit({ type: "attempt:end", jobId, attempt, ...end }),
            (error: unknown) => {
              // The result could not be reported (the control plane did not take it): the lease
              // lapses and the control plane re-places the job; the operator hears why here.
              this.deps.reporting.emit({ type: "attempt:error", jobId, attempt, phase: "report", error });
              this.deps.reporting.log.error(
                { jobId, attempt, err: error },
                `attempt ${attempt} of ${jobId} could not report its result: ${messageOf(error)}`,
              );
            },
          )
          .finally(() => {
            if (this.holds.release(`${jobId}-a${attempt}`)) this.acknowledging?.nudge();
            this.usedVcpus -= placement.limits.vcpus;
            this.sandboxes.delete(`${jobId}-a${attempt}`);
            this.diskReservations.delete(`${jobId}-a${attempt}`);
            this.running.delete(task);
            this.wake();
          });
        this.running.add(task);
      }
    } catch (error) {
      this.deps.reporting.emit({ type: "claim:error", error });
      this.deps.reporting.log.warn({ host: this.deps.hostId, err: error }, `claim failed: ${messageOf(error)}`);
    }
  }

  /** Holds the attempt's quota (its size's, lowered to the executor's most) against the host's disk until it ends. */
  private reserveDisk(attemptId: string, placement: Placement): void {
    const policy = this.deps.isolation.executor.disk;
    if (policy === undefined) return;
    const quotaBytes = Math.min(placement.limits.diskBytes, policy.maxAttemptBytes ?? Number.POSITIVE_INFINITY);
    this.diskReservations.set(attemptId, { attemptDir: join(this.deps.workRoot, attemptId), quotaBytes });
  }

  /**
   * The attempts this host has a sandbox for: those it runs, and every attempt directory left in
   * the work root (an attempt's directory is removed when it ends; one still there without a
   * running attempt is an orphan the control plane flags).
   */
  private async sandboxesOnHost(): Promise<string[]> {
    const onDisk = await readdir(this.deps.workRoot).catch(() => [] as string[]);
    return [...new Set([...this.sandboxes, ...onDisk.filter((name) => ATTEMPT_DIRECTORY.test(name))])].sort();
  }

  private track(work: Promise<void>): void {
    this.cleanups.add(work);
    void work.finally(() => this.cleanups.delete(work));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    // A waiting claim is taken back; one whose answer is under way is read, and its attempt run.
    this.waiting?.withdraw.abort();
    await this.claimRun;
    await this.acknowledging?.stop();
    await this.fleet?.stop();
    await Promise.all(this.running);
    await Promise.all(this.cleanups);
    // A host that stops leaves no target disk of its own mounted (kept-target-disk.ts).
    const roots = [this.deps.workRoot, ...(this.deps.lineages === undefined ? [] : [this.deps.lineages.root])];
    await this.deps.isolation
      .releaseKeptDisks?.(roots)
      .catch((error: unknown) =>
        this.deps.reporting.log.error(
          { host: this.deps.hostId, err: error },
          `kept target disks could not be unmounted: ${messageOf(error)}`,
        ),
      );
  }
}
