import { access, readFile } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { HEALTH_REPORTED_MESSAGE } from "../remote/health-reporter.js";
import { BareMetalClient } from "./bare-metal-client.js";
import { BareMetalRecoveryProvider } from "./bare-metal-recovery-provider.js";
import { LocalRecoveryProvider } from "./local-recovery-provider.js";
import type { RecoveryProvider } from "./recovery-provider.js";
import { ProcessSupervisor } from "./service-supervisor.js";

/** The kiln-host bin beside this one, which the local provider supervises by default. */
const KILN_HOST_BIN = join(dirname(fileURLToPath(import.meta.url)), "..", "remote", "main.js");

export interface HostOperatorSetup {
  readonly environment: string;
  readonly instance: string;
  readonly provisioningBundle: Uint8Array;
  readonly provider: RecoveryProvider | null;
  readonly supervisor: ProcessSupervisor | null;
}

/**
 * `kiln-host-operator`'s configuration from its environment:
 * - KILN_HOST_OPERATOR_PROVIDER: `local` (default; supervises the kiln-host: KILN_HOST_COMMAND,
 *   default the kiln-host bin beside this one, started with this process's environment) or
 *   `bare-metal` (KILN_BARE_METAL_ENDPOINT, KILN_BARE_METAL_SERVER, KILN_BARE_METAL_CREDENTIAL_FILE
 *   holding `user:password`, KILN_BARE_METAL_DIST).
 * - KILN_HOST_SERVICE_NAME (default `kiln-host`): the name the recovery confirmation carries.
 * - KILN_HOST_OPERATOR_ENVIRONMENT (default `production`), KILN_PROVISIONING_BUNDLE (a file;
 *   only its SHA-256 is reported; empty when unset).
 */
export async function hostOperatorSetupFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<HostOperatorSetup> {
  const serviceName = env.KILN_HOST_SERVICE_NAME?.trim() || "kiln-host";
  const dataDir = resolve(env.KILN_HOST_DATA_DIR?.trim() || "./.kiln-host");
  const bundlePath = env.KILN_PROVISIONING_BUNDLE?.trim();
  const provisioningBundle = bundlePath ? await readFile(bundlePath) : new Uint8Array();
  const common = {
    environment: env.KILN_HOST_OPERATOR_ENVIRONMENT?.trim() || "production",
    instance: `${hostname()}:${process.pid}`,
    provisioningBundle,
  };
  const kind = env.KILN_HOST_OPERATOR_PROVIDER?.trim() || "local";
  if (kind === "local") {
    const supervisor = new ProcessSupervisor({
      serviceName,
      command: process.execPath,
      args: [env.KILN_HOST_COMMAND?.trim() || KILN_HOST_BIN],
      env,
      ready: new RegExp(HEALTH_REPORTED_MESSAGE),
    });
    return { ...common, supervisor, provider: new LocalRecoveryProvider({ supervisor, dataDir }) };
  }
  if (kind !== "bare-metal") throw new Error("KILN_HOST_OPERATOR_PROVIDER must be local or bare-metal");
  const endpoint = env.KILN_BARE_METAL_ENDPOINT?.trim();
  const server = env.KILN_BARE_METAL_SERVER?.trim();
  const credentialFile = env.KILN_BARE_METAL_CREDENTIAL_FILE?.trim();
  if (!endpoint || !server || !credentialFile) {
    throw new Error(
      "bare-metal needs KILN_BARE_METAL_ENDPOINT, KILN_BARE_METAL_SERVER and KILN_BARE_METAL_CREDENTIAL_FILE",
    );
  }
  const client = new BareMetalClient({
    endpoint,
    credential: async () => (await readFile(credentialFile, "utf8")).trim(),
  });
  const provider = new BareMetalRecoveryProvider({
    client,
    server,
    serviceName,
    installation: `server ${server}`,
    dist: env.KILN_BARE_METAL_DIST?.trim() || "Debian 12 base",
    identityReadable: () =>
      access(credentialFile).then(
        () => true,
        () => false,
      ),
    // The machine is back when its provider reports it ready again.
    hostCameBack: async () => (await client.status(server)) === "ready",
  });
  return { ...common, supervisor: null, provider };
}
