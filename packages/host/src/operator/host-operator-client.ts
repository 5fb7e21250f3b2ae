import {
  HOST_OPERATOR_ROUTES,
  type HostHealthReport,
  type HostOperatorReadiness,
  type HostRecoveryClaimAnswer,
  type HostRecoveryFinish,
  type HostRecoveryPlan,
  type HostRecoveryStepAnswer,
  type HostRecoveryStepBegin,
  type HostRecoveryStepEnd,
} from "@kiln/contract";
import type { HostTlsIdentity } from "../remote/host-tls-identity.js";
import { requester } from "../remote/http-host-protocol.js";

/** The host's health and recovery messages, as the host operator and kiln-host send them. */
export interface HostOperatorClient {
  health(report: HostHealthReport): Promise<void>;
  readiness(readiness: HostOperatorReadiness): Promise<void>;
  claimRecovery(hostId: string, instance: string): Promise<HostRecoveryClaimAnswer>;
  planRecovery(plan: HostRecoveryPlan): Promise<void>;
  beginStep(begin: HostRecoveryStepBegin): Promise<HostRecoveryStepAnswer>;
  endStep(end: HostRecoveryStepEnd): Promise<void>;
  finishRecovery(finish: HostRecoveryFinish): Promise<void>;
}

/**
 * Those messages over HTTPS (contract/src/host-operator-protocol.ts) under the host's client
 * certificate; a refusal is thrown as HostProtocolRefusal, as for the rest of the host protocol.
 */
export function httpHostOperatorClient(options: {
  endpoint: string;
  identity: Pick<HostTlsIdentity, "fetch">;
  timeoutMs?: number;
}): HostOperatorClient {
  const call = requester(options.endpoint, options.identity.fetch, options.timeoutMs ?? 120_000);
  const json = async <T>(route: { path: string }, body: unknown): Promise<T> => {
    const response = await call(route.path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return (response.status === 204 ? undefined : await response.json()) as T;
  };
  const routes = HOST_OPERATOR_ROUTES;
  return {
    health: (report) => json<void>(routes.health, report),
    readiness: (readiness) => json<void>(routes.readiness, readiness),
    claimRecovery: (hostId, instance) => json<HostRecoveryClaimAnswer>(routes.claimRecovery, { hostId, instance }),
    planRecovery: (plan) => json<void>(routes.planRecovery, plan),
    beginStep: (begin) => json<HostRecoveryStepAnswer>(routes.beginStep, begin),
    endStep: (end) => json<void>(routes.endStep, end),
    finishRecovery: (finish) => json<void>(routes.finishRecovery, finish),
  };
}
