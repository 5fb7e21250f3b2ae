import { readFileSync } from "node:fs";
import type { GatewayEgress } from "./dependency-gateway.js";
import { type OwnListener, parseGatewayAllow } from "./egress-policy.js";

/** crates.io's sparse index: what `KILN_CRATES_IO_INDEX` replaces (a mirror, or a test registry). */
export const DEFAULT_CRATES_IO_INDEX = "sparse+https://index.crates.io/";

/** KILN_CRATES_IO_INDEX, checked: the sparse index standing for crates.io (default crates.io's own). */
export function cratesIoIndexOf(env: Readonly<Record<string, string | undefined>>): string {
  const index = env.KILN_CRATES_IO_INDEX?.trim() || DEFAULT_CRATES_IO_INDEX;
  if (!/^sparse\+https?:\/\/./.test(index)) {
    throw new Error("KILN_CRATES_IO_INDEX must be a sparse index URL (sparse+https://…/)");
  }
  return index;
}

/** What an operator sets of the gateway's egress besides the crates.io index. */
export interface GatewayEgressSettings {
  readonly egress: GatewayEgress;
  /** KILN_GATEWAY_CA_FILE's certificates (PEM), trusted besides the system's. */
  readonly extraCa: string | undefined;
}

function onOff(env: Readonly<Record<string, string | undefined>>, name: string): boolean {
  const value = env[name]?.trim().toLowerCase() ?? "";
  if (value === "" || value === "off") return false;
  if (value === "on") return true;
  throw new Error(`${name} must be on or off`);
}

/**
 * The dependency gateway's egress settings (egress-policy.ts):
 * - KILN_GATEWAY_ALLOW: hosts, addresses and networks (optionally `:port`) a tenant's URLs may
 *   reach although they are private, loopback or link-local, and may reach over plain http —
 *   a private registry inside the operator's network;
 * - KILN_GATEWAY_GIT_SSH=on: git dependencies over ssh too (through the same address rule);
 * - KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS=on: a registry credential may go over plain http
 *   to a loopback address (test registries; never elsewhere);
 * - KILN_GATEWAY_CA_FILE: a PEM file of certificate authorities trusted besides the system's.
 * `ownListeners` are kiln's own listeners on this machine, refused whatever KILN_GATEWAY_ALLOW says.
 */
export function gatewayEgressOf(
  env: Readonly<Record<string, string | undefined>>,
  ownListeners: readonly OwnListener[] = [],
): GatewayEgressSettings {
  const caFile = env.KILN_GATEWAY_CA_FILE?.trim() || undefined;
  let extraCa: string | undefined;
  if (caFile !== undefined) {
    try {
      extraCa = readFileSync(caFile, "utf8");
    } catch (error) {
      throw new Error(`KILN_GATEWAY_CA_FILE: ${caFile} cannot be read (${(error as Error).message})`);
    }
    if (!extraCa.includes("-----BEGIN CERTIFICATE-----")) {
      throw new Error(`KILN_GATEWAY_CA_FILE: ${caFile} holds no PEM certificate`);
    }
  }
  return {
    egress: {
      allow: parseGatewayAllow(env.KILN_GATEWAY_ALLOW),
      ownListeners,
      gitSsh: onOff(env, "KILN_GATEWAY_GIT_SSH"),
      loopbackHttpCredentials: onOff(env, "KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS"),
    },
    extraCa,
  };
}
