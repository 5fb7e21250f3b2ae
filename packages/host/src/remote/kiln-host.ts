import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { dirname, join, resolve } from "node:path";
import { type Clock, type Logger, systemClock } from "@kiln/contract";
import type { AttemptRunnerDeps } from "../agent/attempt/attempt-context.js";
import type { HostAgent } from "../agent/host-agent.js";
import type { HostEvent } from "../agent/host-events.js";
import { startMachineHost } from "../agent/start-machine-host.js";
import type { Executor } from "../executor/executor.js";
import { cratesIoIndexOf } from "../gateway/dependency-gateway.js";
import { httpHostOperatorClient } from "../operator/host-operator-client.js";
import { startHealthReporter } from "./health-reporter.js";
import { hostIdentityOf, httpHostProtocol, redeemEnrollmentToken } from "./http-host-protocol.js";

/** What a `kiln-host` needs: where its control plane is, who it is, where it keeps its work. */
export interface KilnHostConfig {
  /** KILN_ENDPOINT: the control plane's origin. */
  readonly endpoint: string;
  /** KILN_HOST_CREDENTIAL: the host's credential; else the one in `credentialFile`. */
  readonly credential: string | undefined;
  /** KILN_HOST_ENROLLMENT_TOKEN: redeemed for a credential (kept in `credentialFile`) when there is none. */
  readonly enrollmentToken: string | undefined;
  /** KILN_HOST_CREDENTIAL_FILE (default `<data dir>/host-credential`, mode 0600). */
  readonly credentialFile: string;
  /** KILN_HOST_DATA_DIR (default `./.kiln-host`): attempts/, lineages/ and crates/ live here. */
  readonly dataDir: string;
  /** KILN_HOST_VCPUS: vCPU slots offered (default: the machine's). */
  readonly vcpus: number;
  /** KILN_CRATES_IO_INDEX: the sparse index standing for crates.io in the dependency gateway. */
  readonly cratesIoIndex: string;
}

export function kilnHostConfigFromEnv(env: NodeJS.ProcessEnv = process.env): KilnHostConfig {
  const endpoint = env.KILN_ENDPOINT?.trim();
  if (endpoint === undefined || endpoint === "") throw new Error("KILN_ENDPOINT must name the control plane");
  const url = new URL(endpoint);
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("KILN_ENDPOINT must be http(s)://");
  const dataDir = resolve(env.KILN_HOST_DATA_DIR?.trim() || "./.kiln-host");
  const vcpus = env.KILN_HOST_VCPUS === undefined ? availableParallelism() : Number(env.KILN_HOST_VCPUS);
  if (!Number.isInteger(vcpus) || vcpus < 1) throw new Error("KILN_HOST_VCPUS must be a positive integer");
  const cratesIoIndex = cratesIoIndexOf(env);
  return {
    endpoint: url.origin,
    credential: env.KILN_HOST_CREDENTIAL?.trim() || undefined,
    enrollmentToken: env.KILN_HOST_ENROLLMENT_TOKEN?.trim() || undefined,
    credentialFile: resolve(env.KILN_HOST_CREDENTIAL_FILE?.trim() || join(dataDir, "host-credential")),
    dataDir,
    vcpus,
    cratesIoIndex,
  };
}

/** Replacements for the real machine's parts, for tests (an in-memory executor, a manual clock). */
export interface KilnHostOverrides {
  readonly executor?: Executor;
  readonly resolveToolchain?: AttemptRunnerDeps["resolveToolchain"];
  readonly clock?: Clock;
  readonly memoryBytes?: number;
  /** null: no warm lineages. */
  readonly lineages?: null;
  /** null: attempts' workspaces stay in their attempt directory. */
  readonly scratchRoot?: string | null;
  readonly fetch?: typeof fetch;
  readonly onEvent?: (event: HostEvent) => void;
}

export interface RunningKilnHost {
  readonly hostId: string;
  readonly agent: HostAgent;
  stop(): Promise<void>;
}

/**
 * The host's credential: the configured one, else the one kept in the credential file, else
 * the enrollment token redeemed for one (written to the file, readable by this user only,
 * before anything else happens, so a restart never needs the spent token again).
 */
export async function hostCredential(config: KilnHostConfig, fetchImpl: typeof fetch = fetch): Promise<string> {
  if (config.credential !== undefined) return config.credential;
  const kept = await readFile(config.credentialFile, "utf8").then(
    (text) => text.trim(),
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return "";
      throw error;
    },
  );
  if (kept !== "") return kept;
  if (config.enrollmentToken === undefined) {
    throw new Error(
      `no host credential: set KILN_HOST_CREDENTIAL, or KILN_HOST_ENROLLMENT_TOKEN (from \`kiln-server admin host enrollment-token <host-id>\`) to enroll; ${config.credentialFile} holds none`,
    );
  }
  const issued = await redeemEnrollmentToken(config.endpoint, config.enrollmentToken, fetchImpl);
  await mkdir(dirname(config.credentialFile), { recursive: true, mode: 0o700 });
  await writeFile(config.credentialFile, `${issued.credential}\n`, { mode: 0o600 });
  await chmod(config.credentialFile, 0o600);
  return issued.credential;
}

/**
 * `kiln-host`: the host agent on its own machine, speaking the host protocol over HTTP to a
 * remote control plane with its own credential. It learns its id from the control plane (the
 * credential names it), enrolls, and claims attempts until stopped.
 */
export async function startKilnHost(
  config: KilnHostConfig,
  log: Logger,
  overrides: KilnHostOverrides = {},
): Promise<RunningKilnHost> {
  const fetchImpl = overrides.fetch ?? fetch;
  const clock = overrides.clock ?? systemClock;
  const credential = await hostCredential(config, fetchImpl);
  const hostId = await hostIdentityOf(config.endpoint, credential, fetchImpl);
  const workRoot = join(config.dataDir, "attempts");
  await mkdir(workRoot, { recursive: true });
  const machine = await startMachineHost({
    hostId,
    protocol: httpHostProtocol({ endpoint: config.endpoint, credential, fetch: fetchImpl }),
    clock,
    log,
    ...(overrides.onEvent === undefined ? {} : { onEvent: overrides.onEvent }),
    workRoot,
    lineageRoot: overrides.lineages === null ? null : join(config.dataDir, "lineages"),
    ...(overrides.scratchRoot === undefined ? {} : { scratchRoot: overrides.scratchRoot }),
    crateCache: { root: join(config.dataDir, "crates"), cratesIoIndex: config.cratesIoIndex },
    // What operator.hosts.evidence and evidence_export read retained files from.
    evidenceRoot: join(config.dataDir, "evidence"),
    vcpus: config.vcpus,
    ...(overrides.memoryBytes === undefined ? {} : { memoryBytes: overrides.memoryBytes }),
    ...(overrides.executor === undefined ? {} : { executor: overrides.executor }),
    ...(overrides.resolveToolchain === undefined ? {} : { resolveToolchain: overrides.resolveToolchain }),
  });
  log.info({ hostId, endpoint: config.endpoint }, `kiln-host ${hostId} enrolled with ${config.endpoint}`);
  // Health reports (disk free; also a heartbeat) for the control plane's impairment detector.
  const health = await startHealthReporter({
    client: httpHostOperatorClient({ endpoint: config.endpoint, credential, fetch: fetchImpl }),
    hostId,
    dataDir: config.dataDir,
    clock,
    log,
  });
  return {
    hostId,
    agent: machine.agent,
    stop: async () => {
      await health.stop();
      await machine.stop();
    },
  };
}
