import { createHash } from "node:crypto";
import {
  type ClaimedHostRecovery,
  type Clock,
  type HostActivationStep,
  type Logger,
  type LoopFailure,
  messageOf,
  type PeriodicLoop,
  startPeriodicLoop,
} from "@kiln/contract";
import type { HostOperatorClient } from "./host-operator-client.js";
import type { LedgerEntry, RecoveryProvider, RecoveryRequest } from "./recovery-provider.js";

type StepOutcome = HostActivationStep["outcome"];
/** HostActivationStep's `detail` bound (contract/src/host-operator-protocol.ts). */
const ACTIVATION_DETAIL_MAX = 4000;

export type HostOperatorEvent =
  | { readonly type: "recovery:claimed"; readonly operation: string }
  | { readonly type: "recovery:awaiting_approval"; readonly operation: string; readonly step: string }
  | { readonly type: "recovery:step"; readonly operation: string; readonly step: string; readonly outcome: string }
  | { readonly type: "recovery:finished"; readonly operation: string; readonly outcome: "succeeded" | "failed" };

export interface HostOperatorOptions {
  readonly client: HostOperatorClient;
  readonly hostId: string;
  /** This host operator process's instance name. */
  readonly instance: string;
  readonly environment: string;
  /** The provisioning bundle it loaded; only its digest is reported. */
  readonly provisioningBundle: Uint8Array;
  /** The recovery binding: null when none loaded (the operator then runs no recovery). */
  readonly provider: RecoveryProvider | null;
  /** The boot this process runs in (e.g. /proc/sys/kernel/random/boot_id). */
  readonly boot: string;
  readonly clock: Clock;
  readonly log: Logger;
  readonly onEvent?: (event: HostOperatorEvent) => void;
}

/**
 * The host operator: a process on the host, beside the kiln-host, that runs the host's
 * recoveries — never the control plane nor whoever invoked them (rule 3). Each pass records its
 * readiness (once per process), claims a recovery the control plane recorded, records the
 * provider's plan as the ledger, and runs each step: it asks to begin (a destructive step may
 * be told to wait for its approval — the pass then ends and a later one asks again), runs it
 * through the provider, and reports its end and outcome. A failed step ends the recovery
 * `failed`, unless the provider's plan answers it with a later step.
 */
export class HostOperator {
  #readinessRecorded = false;
  readonly #startedAt: string;

  constructor(private readonly options: HostOperatorOptions) {
    this.#startedAt = options.clock.now().toISOString();
  }

  async runOnce(): Promise<void> {
    const { client, hostId, instance } = this.options;
    if (!this.#readinessRecorded) {
      await this.#recordReadiness();
      this.#readinessRecorded = true;
    }
    if (this.options.provider === null) return;
    const { recovery } = await client.claimRecovery(hostId, instance);
    if (recovery === null) return;
    this.options.onEvent?.({ type: "recovery:claimed", operation: recovery.operation });
    await this.#run(this.options.provider, recovery);
  }

  /**
   * Reports this start of the host operator (its activation): the readiness the control plane
   * records, with the ledger of the steps it ran to become ready, each with its own instants, so
   * that every start on every boot is kept apart. A step that fails does not stop the others:
   * the readiness is what an operator reads to learn which one did.
   */
  async #recordReadiness(): Promise<void> {
    const { provider, clock } = this.options;
    const steps: HostActivationStep[] = [];
    const run = async <T>(step: string, body: () => Promise<{ value: T; outcome: StepOutcome; detail: string }>) => {
      const startedAt = clock.now().toISOString();
      let result: { value: T | undefined; outcome: StepOutcome; detail: string };
      try {
        result = await body();
      } catch (error) {
        result = { value: undefined, outcome: "failed", detail: messageOf(error) };
      }
      steps.push({
        step,
        outcome: result.outcome,
        startedAt,
        finishedAt: clock.now().toISOString(),
        // The protocol bounds a detail; an error's message is not allowed to cost the readiness.
        detail: result.detail.slice(0, ACTIVATION_DETAIL_MAX),
      });
      return result.value;
    };
    const digest = createHash("sha256").update(this.options.provisioningBundle).digest("hex");
    await run("load_provisioning_bundle", async () => ({
      value: undefined,
      outcome: "succeeded",
      detail: `bundle sha256 ${digest}`,
    }));
    await run("load_recovery_binding", async () =>
      provider === null
        ? { value: undefined, outcome: "failed", detail: "no recovery binding loaded" }
        : {
            value: undefined,
            outcome: "succeeded",
            detail: `${provider.kind} provider for ${provider.serviceName}${provider.installation === null ? "" : ` (${provider.installation})`}`,
          },
    );
    const identityReadable = await run("check_provider_identity", async () => {
      if (provider === null) return { value: false, outcome: "skipped", detail: "no recovery binding to read it from" };
      const readable = await provider.identityReadable();
      return {
        value: readable,
        outcome: readable ? "succeeded" : "failed",
        detail: readable ? "readable" : "not readable",
      };
    });
    await this.options.client.readiness({
      hostId: this.options.hostId,
      instance: this.options.instance,
      startedAt: this.#startedAt,
      environment: this.options.environment,
      provisioningBundleSha256: digest,
      recoveryBindingLoaded: provider !== null,
      installation: provider?.installation ?? null,
      providerIdentityReadable: identityReadable === true,
      provider: provider?.kind ?? "local",
      providerServiceName: provider?.serviceName ?? "kiln-host",
      boot: this.options.boot,
      activation: { steps },
    });
  }

  async #run(provider: RecoveryProvider, recovery: ClaimedHostRecovery): Promise<void> {
    const { client, hostId, log } = this.options;
    const operation = recovery.operation;
    const request: RecoveryRequest = {
      operation,
      rescueRead: recovery.rescueRead,
      rescueSshPublicKey: recovery.rescueSshPublicKey,
    };
    let ledger: LedgerEntry[] = recovery.steps;
    if (ledger.length === 0) {
      const plan = provider.plan(request);
      await client.planRecovery({ hostId, operation, steps: plan });
      ledger = plan.map((step, position) => ({ position, step, state: "pending" }));
    }
    for (const entry of ledger) {
      if (entry.state === "succeeded" || entry.state === "failed" || entry.state === "skipped") continue;
      const report = async (outcome: "succeeded" | "failed" | "skipped", detail: string) => {
        await client.endStep({ hostId, operation, position: entry.position, outcome, detail });
        ledger = ledger.map((e) => (e.position === entry.position ? { ...e, state: outcome } : e));
        this.options.onEvent?.({ type: "recovery:step", operation, step: entry.step, outcome });
      };
      if (!provider.needed(entry.step, ledger)) {
        await report("skipped", "not needed");
        continue;
      }
      const begin = await client.beginStep({ hostId, operation, position: entry.position });
      if (begin.answer === "await_approval") {
        log.warn({ operation, step: entry.step }, `recovery ${operation}: ${begin.reason ?? "awaiting approval"}`);
        this.options.onEvent?.({ type: "recovery:awaiting_approval", operation, step: entry.step });
        return;
      }
      let result: Awaited<ReturnType<RecoveryProvider["runStep"]>>;
      try {
        result = await provider.runStep(entry.step, request);
      } catch (error) {
        result = { outcome: "failed", detail: messageOf(error) };
      }
      await report(result.outcome, result.detail);
      if (result.outcome === "failed" && result.recoverable !== true) {
        await this.#finish(operation, "failed", `${entry.step}: ${result.detail}`);
        return;
      }
    }
    await this.#finish(operation, "succeeded", null);
  }

  async #finish(operation: string, outcome: "succeeded" | "failed", detail: string | null): Promise<void> {
    await this.options.client.finishRecovery({ hostId: this.options.hostId, operation, outcome, detail });
    this.options.log.info({ operation, outcome }, `recovery ${operation} ${outcome}`);
    this.options.onEvent?.({ type: "recovery:finished", operation, outcome });
  }
}

/** Runs the host operator every `everyMs` on the clock; a failed pass is logged and emitted. */
export function startHostOperator(
  operator: HostOperator,
  deps: { clock: Clock; log: Logger; onFailure?: (failure: LoopFailure) => void },
  everyMs = 5000,
): PeriodicLoop {
  return startPeriodicLoop({
    name: "host operator",
    clock: deps.clock,
    everyMs,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: () => operator.runOnce(),
  });
}
