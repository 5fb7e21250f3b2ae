import type { RegistryCredentialGrant } from "@kiln/contract";
import type { GatewayConfig, ProvidedDependencies, ProvideRequest } from "./dependency-gateway.js";
import type { GatewayErrorKind } from "./gateway-error.js";

/**
 * The messages between the host agent and a dependency-gateway worker (one child process per
 * attempt, gateway-worker.ts), over Node's IPC channel as JSON. Everything of tenant size stays
 * in the worker; these carry a request's small parts, log lines and the result.
 */

/** The gateway's configuration as it crosses to the worker (the clock and resolver are the worker's own). */
export type WorkerGatewayConfig = Omit<GatewayConfig, "clock" | "resolver" | "onCrateStored">;

/** A provide request without its callbacks and signal (those stay with the agent). */
export type WorkerProvideRequest = Omit<ProvideRequest, "credentials" | "generateLockfile" | "log" | "signal">;

export type ToWorker =
  | { readonly type: "provide"; readonly config: WorkerGatewayConfig; readonly request: WorkerProvideRequest }
  | { readonly type: "credentials"; readonly grants: readonly RegistryCredentialGrant[] }
  | { readonly type: "lockfile"; readonly id: number; readonly text: string };

export type FromWorker =
  | { readonly type: "log"; readonly line: string }
  | { readonly type: "credentials" }
  | {
      readonly type: "generate-lockfile";
      readonly id: number;
      readonly config: string;
      readonly environment: Readonly<Record<string, string>>;
    }
  /** A crate the worker stored in the shared cache (the agent accounts and evicts). */
  | { readonly type: "stored"; readonly bytes: number }
  | { readonly type: "done"; readonly result: ProvidedDependencies }
  | {
      readonly type: "failed";
      /** Set when the failure is the job's (a GatewayError); otherwise an error of the host. */
      readonly kind: GatewayErrorKind | null;
      readonly message: string;
    };
