#!/usr/bin/env node
import { type Logger, messageOf } from "@kiln/contract";
import { kilnHostConfigFromEnv, startKilnHost } from "./kiln-host.js";

/** JSON lines on stderr, one per event, as pino writes them (the host carries no logging library). */
function jsonLinesLogger(): Logger {
  const write = (level: number) => (details: object, message: string) => {
    const extra = Object.fromEntries(
      Object.entries(details).map(([key, value]) => [key, value instanceof Error ? value.message : value]),
    );
    process.stderr.write(`${JSON.stringify({ level, time: Date.now(), ...extra, msg: message })}\n`);
  };
  return { error: write(50), warn: write(40), info: write(30) };
}

/**
 * `kiln-host`: runs the host agent against a remote control plane's host listener (KILN_ENDPOINT,
 * https) with its own client certificate (kept under KILN_HOST_DATA_DIR/tls/; obtained once with
 * KILN_HOST_ENROLLMENT_TOKEN, renewed while it runs), until SIGINT or SIGTERM, when it stops
 * claiming and waits for its running attempts.
 */
async function main(): Promise<void> {
  const log = jsonLinesLogger();
  const host = await startKilnHost(kilnHostConfigFromEnv(), log);
  // The clock's timers are unref'd (background work), so between two polls nothing else would keep
  // this process alive: it runs until a signal stops it.
  const keepAlive = setInterval(() => {}, 2 ** 30);
  const shutdown = async () => {
    log.info({ hostId: host.hostId }, "stopping: no new claims; waiting for running attempts");
    await host.stop();
    clearInterval(keepAlive);
    process.exit(0);
  };
  process.once("SIGINT", shutdown);
  process.once("SIGTERM", shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(`kiln-host: ${messageOf(error)}\n`);
  process.exit(1);
});
