import { statfs } from "node:fs/promises";
import { type Clock, type Logger, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import type { HostOperatorClient } from "../operator/host-operator-client.js";

/** How often a kiln-host reports its health (the control plane's heartbeat bound is longer). */
export const HEALTH_REPORT_EVERY_MS = 10_000;

/** The line a kiln-host logs once its first health report reached the control plane. */
export const HEALTH_REPORTED_MESSAGE = "health reported to the control plane";

/**
 * Reports the kiln-host's health to the control plane: the disk free under its data dir
 * (statfs), so a disk filling is seen before attempts fail on it. Its arrival is also a
 * heartbeat. Reported at once and then every HEALTH_REPORT_EVERY_MS; a failed report is
 * logged and the next tries again.
 */
export async function startHealthReporter(options: {
  client: Pick<HostOperatorClient, "health">;
  hostId: string;
  dataDir: string;
  clock: Clock;
  log: Logger;
  everyMs?: number;
}): Promise<PeriodicLoop> {
  const report = async () => {
    const fs = await statfs(options.dataDir);
    await options.client.health({
      hostId: options.hostId,
      diskFreeBytes: Number(fs.bavail) * Number(fs.bsize),
      diskTotalBytes: Number(fs.blocks) * Number(fs.bsize),
      failedInitializationStep: null,
    });
  };
  await report();
  options.log.info({ hostId: options.hostId }, HEALTH_REPORTED_MESSAGE);
  return startPeriodicLoop({
    name: "health reporter",
    clock: options.clock,
    everyMs: options.everyMs ?? HEALTH_REPORT_EVERY_MS,
    log: options.log,
    run: report,
  });
}
