import type { InjectionItem } from "@kiln/contract";
import type { Placement } from "../host-protocol.js";

/** The environment of the injections admission applied (a not-applied one sets nothing). */
export function injectedEnvironment(placement: Placement): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const injection of placement.injections) {
    if (injection.status === "applied" && injection.environment !== null) {
      environment[injection.environment.name] = injection.environment.value;
    }
  }
  return environment;
}

/** Evidence `injections`: every decision, as admitted. */
export function injectionItems(placement: Placement): InjectionItem[] {
  return placement.injections.map(({ setting, value, origin, status, detail }) => ({
    setting,
    value,
    origin,
    status,
    detail,
  }));
}
