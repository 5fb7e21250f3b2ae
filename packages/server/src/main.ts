#!/usr/bin/env node
import { openStorage, systemClock } from "@kiln/storage";
import { Command } from "commander";
import { adminCommand } from "./admin/admin-commands.js";
import { buildApp } from "./build-app.js";
import { configFromEnv } from "./config.js";
import { ensureFirstStartTenant } from "./first-start.js";
import { VERSION } from "./version.js";

const program = new Command("kiln-server").description("the kiln control plane").version(VERSION);

program
  .command("serve")
  .description("serve the tenant and operator APIs (KILN_LISTEN, KILN_DATA_DIR, KILN_DATABASE_URL)")
  .action(async () => {
    const config = configFromEnv();
    const storage = await openStorage({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
    const app = buildApp({
      storage,
      clock: systemClock,
      version: VERSION,
      logger: { level: process.env.KILN_LOG_LEVEL ?? "info" },
    });
    const shutdown = async () => {
      await app.close();
      await storage.close();
      process.exit(0);
    };
    process.once("SIGINT", shutdown);
    process.once("SIGTERM", shutdown);
    const address = await app.listen({ host: config.host, port: config.port });
    const first = await ensureFirstStartTenant(storage, systemClock.now());
    const where = config.databaseUrl === undefined ? `data dir ${config.dataDir}` : "PostgreSQL";
    process.stdout.write(`kiln ${VERSION} serving ${address} (${where})\n`);
    process.stdout.write(`  OpenAPI document: ${address}/api/openapi.json\n`);
    if (first !== null)
      process.stdout.write(`  first start: created tenant ${first.tenant} with owner ${first.email}\n`);
  });

program.addCommand(
  adminCommand(async () => {
    const config = configFromEnv();
    return openStorage({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  }),
);

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`kiln-server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
