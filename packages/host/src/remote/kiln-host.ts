import { chmod, mkdir } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { type Clock, type Logger, systemClock } from "@kiln/contract";
import type { AttemptRunnerDeps } from "../agent/attempt/attempt-context.js";
import type { HostAgent } from "../agent/host-agent.js";
import type { HostEvent } from "../agent/host-events.js";
import { startMachineHost } from "../agent/start-machine-host.js";
import type { HostIsolation } from "../executor/host-isolation.js";
import { isolationSettingsFromEnv, selectHostIsolation } from "../executor/select-isolation.js";
import { cratesIoIndexOf, gatewayEgressOf } from "../gateway/gateway-settings.js";
import { httpHostOperatorClient } from "../operator/host-operator-client.js";
import { type RenewalEvent, startCertificateRenewal } from "./certificate-renewal.js";
import { startHealthReporter } from "./health-reporter.js";
import { loadHostIdentity } from "./host-enrollment.js";
import { type HostTlsIdentity, tlsFilesIn } from "./host-tls-identity.js";
import { httpHostProtocol } from "./http-host-protocol.js";
import type { KilnHostConfig } from "./kiln-host-config.js";

export function kilnHostConfigFromEnv(env: NodeJS.ProcessEnv = process.env): KilnHostConfig {
  const endpoint = env.KILN_ENDPOINT?.trim();
  if (endpoint === undefined || endpoint === "") throw new Error("KILN_ENDPOINT must name the control plane");
  const url = new URL(endpoint);
  if (url.protocol !== "https:") {
    throw new Error("KILN_ENDPOINT must be https:// (the control plane's host listener, KILN_HOST_LISTEN)");
  }
  const caSha256 = env.KILN_HOST_CA_SHA256?.trim().toLowerCase().replaceAll(":", "") || undefined;
  if (caSha256 !== undefined && !/^[0-9a-f]{64}$/.test(caSha256)) {
    throw new Error("KILN_HOST_CA_SHA256 must be the CA certificate's SHA-256 in hexadecimal");
  }
  const dataDir = resolve(env.KILN_HOST_DATA_DIR?.trim() || "./.kiln-host");
  const vcpus = env.KILN_HOST_VCPUS === undefined ? availableParallelism() : Number(env.KILN_HOST_VCPUS);
  if (!Number.isInteger(vcpus) || vcpus < 1) throw new Error("KILN_HOST_VCPUS must be a positive integer");
  const cratesIoIndex = cratesIoIndexOf(env);
  // A kiln-host listens on nothing of its own; the control plane's listeners are on other machines.
  const gateway = gatewayEgressOf(env);
  const maxDiskText = env.KILN_MAX_ATTEMPT_DISK_BYTES?.trim() || undefined;
  const maxAttemptDiskBytes = maxDiskText === undefined ? undefined : Number(maxDiskText);
  if (
    maxAttemptDiskBytes !== undefined &&
    !(Number.isSafeInteger(maxAttemptDiskBytes) && maxAttemptDiskBytes >= 2 ** 20)
  ) {
    throw new Error("KILN_MAX_ATTEMPT_DISK_BYTES must be a whole number of bytes, at least 1048576 (1 MiB)");
  }
  return {
    endpoint: url.origin,
    enrollmentToken: env.KILN_HOST_ENROLLMENT_TOKEN?.trim() || undefined,
    caSha256,
    tlsFiles: tlsFilesIn(dataDir),
    dataDir,
    vcpus,
    cratesIoIndex,
    gateway,
    // KILN_MAX_ATTEMPT_DISK_BYTES: the most disk one attempt may take here, either isolation.
    isolation: {
      ...isolationSettingsFromEnv(env, dataDir),
      ...(maxAttemptDiskBytes === undefined ? {} : { maxAttemptDiskBytes }),
    },
  };
}

/** Replacements for the real machine's parts, for tests (an isolation with an in-memory executor, a manual clock). */
export interface KilnHostOverrides {
  readonly isolation?: HostIsolation;
  readonly resolveToolchain?: AttemptRunnerDeps["resolveToolchain"];
  readonly clock?: Clock;
  readonly memoryBytes?: number;
  /** null: no warm lineages. */
  readonly lineages?: null;
  /** null: attempts' workspaces stay in their attempt directory. */
  readonly scratchRoot?: string | null;
  readonly onEvent?: (event: HostEvent) => void;
  readonly onRenewal?: (event: RenewalEvent) => void;
}

export interface RunningKilnHost {
  readonly hostId: string;
  readonly agent: HostAgent;
  /** Its TLS identity (the certificate in use changes at each renewal). */
  readonly identity: HostTlsIdentity;
  stop(): Promise<void>;
}

/**
 * `kiln-host`: the host agent on its own machine, speaking the host protocol over HTTPS with
 * mutual TLS to a remote control plane. Its identity (host-enrollment.ts) is its client
 * certificate, which names it; it renews the certificate at two thirds of its lifetime while it
 * runs, enrolls, and claims attempts until stopped.
 */
export async function startKilnHost(
  config: KilnHostConfig,
  log: Logger,
  overrides: KilnHostOverrides = {},
): Promise<RunningKilnHost> {
  const clock = overrides.clock ?? systemClock;
  const identity = await loadHostIdentity(config, log, clock);
  const hostId = identity.hostId;
  const renewal = startCertificateRenewal({
    endpoint: config.endpoint,
    identity,
    clock,
    log,
    ...(overrides.onRenewal === undefined ? {} : { onEvent: overrides.onRenewal }),
  });
  // The host's data dir holds tenants' sources, warm targets, crates and its key: root's alone
  // (0700), whatever an earlier version made it. The sandbox reads nothing here by path.
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  await chmod(config.dataDir, 0o700);
  const workRoot = join(config.dataDir, "attempts");
  await mkdir(workRoot, { recursive: true });
  const machine = await startMachineHost({
    hostId,
    protocol: httpHostProtocol({ endpoint: config.endpoint, identity }),
    clock,
    log,
    ...(overrides.onEvent === undefined ? {} : { onEvent: overrides.onEvent }),
    workRoot,
    lineageRoot: overrides.lineages === null ? null : join(config.dataDir, "lineages"),
    ...(overrides.scratchRoot === undefined ? {} : { scratchRoot: overrides.scratchRoot }),
    crateCache: { root: join(config.dataDir, "crates"), cratesIoIndex: config.cratesIoIndex },
    ...(config.gateway === undefined ? {} : { gatewayEgress: config.gateway.egress }),
    ...(config.gateway?.extraCa === undefined ? {} : { gatewayCa: config.gateway.extraCa }),
    // What operator.hosts.evidence and evidence_export read retained files from.
    evidenceRoot: join(config.dataDir, "evidence"),
    vcpus: config.vcpus,
    ...(overrides.memoryBytes === undefined ? {} : { memoryBytes: overrides.memoryBytes }),
    isolation: overrides.isolation ?? (await selectHostIsolation(config.isolation, { log, clock })),
    ...(overrides.resolveToolchain === undefined ? {} : { resolveToolchain: overrides.resolveToolchain }),
  });
  log.info({ hostId, endpoint: config.endpoint }, `kiln-host ${hostId} enrolled with ${config.endpoint}`);
  // Health reports (disk free; also a heartbeat) for the control plane's impairment detector.
  const health = await startHealthReporter({
    client: httpHostOperatorClient({ endpoint: config.endpoint, identity }),
    hostId,
    dataDir: config.dataDir,
    clock,
    log,
  });
  return {
    hostId,
    agent: machine.agent,
    identity,
    stop: async () => {
      renewal.stop();
      await health.stop();
      await machine.stop();
    },
  };
}
