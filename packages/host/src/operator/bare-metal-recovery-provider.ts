import { messageOf } from "@kiln/contract";
import type { BareMetalClient } from "./bare-metal-client.js";
import type { LedgerEntry, RecoveryProvider, RecoveryRequest, StepResult } from "./recovery-provider.js";

/**
 * The bare-metal provider: recovers the machine through its provider's API. With `rescue_read`
 * it first boots the rescue system (with the one-run rescue key) so the wedged boot's journal
 * can be read from it; then a hardware reset, and a wait for the host to come back. Only when
 * it does not does the plan go on to `reinstallation` — a destructive step, which the control
 * plane begins only once an approval names host, incident and step (rule 5); until then the
 * host operator is told to wait and asks again on a later pass.
 */
export class BareMetalRecoveryProvider implements RecoveryProvider {
  readonly kind = "bare-metal" as const;

  constructor(
    private readonly options: {
      client: BareMetalClient;
      /** The provider's server number. */
      server: string;
      serviceName: string;
      installation: string | null;
      /** The distribution a reinstallation installs. */
      dist: string;
      /** Whether the provider credential can be read here (it is never sent). */
      identityReadable: () => Promise<boolean>;
      /** Whether the host came back after the reset (e.g. its kiln-host reached the control plane). */
      hostCameBack: () => Promise<boolean>;
    },
  ) {}

  get serviceName(): string {
    return this.options.serviceName;
  }

  get installation(): string | null {
    return this.options.installation;
  }

  identityReadable(): Promise<boolean> {
    return this.options.identityReadable();
  }

  plan(request: RecoveryRequest): string[] {
    return [...(request.rescueRead ? ["rescue_boot"] : []), "reset", "await_host", "reinstallation"];
  }

  needed(step: string, ledger: readonly LedgerEntry[]): boolean {
    if (step !== "reinstallation") return true;
    return ledger.find((e) => e.step === "await_host")?.state === "failed";
  }

  async runStep(step: string, request: RecoveryRequest): Promise<StepResult> {
    const { client, server } = this.options;
    try {
      switch (step) {
        case "rescue_boot":
          await client.armRescue(server, request.rescueSshPublicKey);
          await client.reset(server);
          return { outcome: "succeeded", detail: `rescue system armed and server ${server} reset into it` };
        case "reset":
          await client.reset(server);
          return { outcome: "succeeded", detail: `hardware reset of server ${server}` };
        case "await_host":
          return (await this.options.hostCameBack())
            ? { outcome: "succeeded", detail: "the host came back after the reset" }
            : { outcome: "failed", detail: "the host did not come back after the reset", recoverable: true };
        case "reinstallation":
          await client.armReinstallation(server, this.options.dist);
          await client.reset(server);
          return {
            outcome: "succeeded",
            detail: `reinstallation of ${this.options.dist} armed and server ${server} reset`,
          };
        default:
          return { outcome: "failed", detail: `the bare-metal provider has no step ${step}` };
      }
    } catch (error) {
      return { outcome: "failed", detail: messageOf(error) };
    }
  }
}
