#!/usr/bin/env node
import { readFile } from "node:fs/promises";
import { type Logger, messageOf, systemClock } from "@kiln/contract";
import { loadHostIdentity } from "../remote/host-enrollment.js";
import { kilnHostConfigFromEnv } from "../remote/kiln-host.js";
import { HostOperator, startHostOperator } from "./host-operator.js";
import { httpHostOperatorClient } from "./host-operator-client.js";
import { hostOperatorSetupFromEnv } from "./host-operator-config.js";

function jsonLinesLogger(): Logger {
  const write = (level: number) => (details: object, message: string) => {
    process.stderr.write(`${JSON.stringify({ level, time: Date.now(), ...details, msg: message })}\n`);
  };
  return { error: write(50), warn: write(40), info: write(30) };
}

/**
 * `kiln-host-operator`: the host operator beside a kiln-host (same KILN_ENDPOINT and data dir, so
 * the same client certificate; it enrolls first when the host has none, and takes the kiln-host's
 * renewals from the files). With the `local` provider it starts and supervises the kiln-host itself; it runs
 * the host's recoveries as the control plane records them, until SIGINT or SIGTERM.
 */
async function main(): Promise<void> {
  const log = jsonLinesLogger();
  const config = kilnHostConfigFromEnv();
  const identity = await loadHostIdentity(config, log);
  const hostId = identity.hostId;
  const setup = await hostOperatorSetupFromEnv();
  const boot = (await readFile("/proc/sys/kernel/random/boot_id", "utf8").catch(() => "unknown")).trim();
  await setup.supervisor?.restart();
  const operator = new HostOperator({
    client: httpHostOperatorClient({ endpoint: config.endpoint, identity }),
    hostId,
    instance: setup.instance,
    environment: setup.environment,
    provisioningBundle: setup.provisioningBundle,
    provider: setup.provider,
    boot,
    clock: systemClock,
    log,
  });
  const loop = startHostOperator(operator, { clock: systemClock, log });
  // The clock's timers are unref'd (background work), so between two polls nothing else would keep
  // this process alive: it runs until a signal stops it.
  const keepAlive = setInterval(() => {}, 2 ** 30);
  const shutdown = async () => {
    await loop.stop();
    await setup.supervisor?.stop();
    clearInterval(keepAlive);
    process.exit(0);
  };
  process.once("SIGINT", shutdown);
  process.once("SIGTERM", shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(`kiln-host-operator: ${messageOf(error)}\n`);
  process.exit(1);
});
