import {
  type Clock,
  type HostFleetWork,
  type HostReadAnswer,
  messageOf,
  type PeriodicLoop,
  startPeriodicLoop,
} from "@kiln/contract";
import type { InitializationStep } from "../executor/host-isolation.js";
import type { AttemptReaper } from "../executor/shared/reap-attempt.js";
import type { HostReporting } from "./host-events.js";
import type { HostProtocol } from "./host-protocol.js";
import { HostReadRefusal } from "./host-read-refusal.js";
import { type HostReadResult, type HostReads, realHostReads } from "./host-reads.js";
import { runHostInitialization } from "./run-host-initialization.js";

/** How often a host polls for fleet work when nothing nudges it. */
export const FLEET_POLL_EVERY_MS = 5_000;

/**
 * The host's side of the operator's fleet operations: it polls the control plane for work (an
 * initialization an operator started, reads an operator waits on) on its clock, saying which
 * attempts it runs sandboxes for, and does what it is given here, on the host. One poll at a
 * time; a failed poll is logged and emitted by the loop, and the next one tries again.
 */
export class FleetChannel {
  #loop: PeriodicLoop | null = null;

  constructor(
    private readonly deps: {
      readonly hostId: string;
      readonly protocol: HostProtocol;
      readonly clock: Clock;
      /** The host isolation's initialization steps, in order. */
      readonly steps: readonly InitializationStep[];
      readonly reporting: HostReporting;
      /**
       * The attempt ids (`<job>-a<n>`) this host has a sandbox for now: those it runs and any
       * left on disk by one that ended without its cleanup (an orphan).
       */
      readonly sandboxes: () => readonly string[] | Promise<readonly string[]>;
      /** The attempt ids this agent runs now (their sandboxes are no orphans); default none. */
      readonly running?: () => readonly string[];
      /** Answers operators' reads (default: the real journal and kernel log, no evidence directory). */
      readonly reads?: HostReads;
      /** Reaps orphaned sandboxes on the control plane's request; absent, the host reaps none. */
      readonly reaper?: AttemptReaper;
      readonly everyMs?: number;
    },
  ) {}

  start(): void {
    this.#loop = startPeriodicLoop({
      name: "fleet poll",
      clock: this.deps.clock,
      everyMs: this.deps.everyMs ?? FLEET_POLL_EVERY_MS,
      log: this.deps.reporting.log,
      onFailure: this.deps.reporting.emit,
      run: async () => {
        await this.runOnce();
      },
    });
    this.#loop.nudge();
  }

  /**
   * One poll: the reads it answered first (an operator waits on each), then the initialization
   * it answered, run to its end. Tests call it directly.
   */
  async runOnce(): Promise<{ reads: number; initialization: "none" | "finished" | "stale" }> {
    const work = await this.deps.protocol.fleetPoll({
      hostId: this.deps.hostId,
      sandboxes: [...(await this.deps.sandboxes())],
    });
    for (const order of work.reads) await this.#answer(order);
    return { reads: work.reads.length, initialization: await this.#initialize(work.initialization) };
  }

  async #answer(order: HostFleetWork["reads"][number]): Promise<void> {
    const reads = this.deps.reads ?? realHostReads({ evidenceRoot: null });
    let answer: Omit<HostReadAnswer, "hostId" | "id">;
    try {
      const result = order.kind === "reap_sandbox" ? await this.#reap(order.path) : await reads.read(order);
      answer = {
        outcome: "answered",
        content: result.content.toString("base64"),
        truncated: result.truncated,
        detail: result.detail,
        refusal: null,
      };
    } catch (error) {
      answer = {
        outcome: "failed",
        content: "",
        truncated: false,
        detail: messageOf(error).slice(0, 4000),
        refusal: error instanceof HostReadRefusal ? error.refusal : null,
      };
    }
    const ack = await this.deps.protocol.answerRead({ hostId: this.deps.hostId, id: order.id, ...answer });
    if (ack === "stale") {
      this.deps.reporting.log.warn(
        { host: this.deps.hostId, read: order.id },
        `read ${order.id} (${order.kind}) was answered after the operator stopped waiting`,
      );
    }
  }

  /**
   * Reaps an orphaned sandbox the control plane named, answering the reap receipt's entries as
   * JSON. A sandbox this agent still runs an attempt in is no orphan: `conflict`.
   */
  async #reap(attemptId: string | null): Promise<HostReadResult> {
    if (attemptId === null) throw new Error("a reap names the attempt id of the sandbox");
    if ((this.deps.running?.() ?? []).includes(attemptId)) {
      throw new HostReadRefusal("conflict", `this host runs attempt ${attemptId}; its sandbox is no orphan`);
    }
    if (this.deps.reaper === undefined) throw new Error("this host does not reap sandboxes");
    const entries = await this.deps.reaper.reap(attemptId);
    return {
      content: Buffer.from(JSON.stringify(entries)),
      truncated: false,
      detail: `reaped ${attemptId}: ${entries.map((e) => e.kind).join(", ")}`,
    };
  }

  async #initialize(order: HostFleetWork["initialization"]): Promise<"none" | "finished" | "stale"> {
    if (order === null) return "none";
    const { operation } = order;
    this.deps.reporting.log.info({ host: this.deps.hostId, operation }, `initialization ${operation} begins`);
    const end = await runHostInitialization(this.deps, order);
    this.deps.reporting.log.info(
      { host: this.deps.hostId, operation, end },
      end === "stale"
        ? `initialization ${operation} is no longer this host's open one; stopped`
        : `initialization ${operation} reported`,
    );
    return end;
  }

  async stop(): Promise<void> {
    await this.#loop?.stop().catch((error: unknown) => {
      this.deps.reporting.log.warn({ err: error }, `fleet poll stop: ${messageOf(error)}`);
    });
  }
}
