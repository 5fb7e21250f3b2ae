#!/usr/bin/env node
import { chmodSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { systemClock } from "@kiln/contract";
import { isolationSettingsFromEnv, selectHostIsolation } from "@kiln/host";
import { LocalBlobStore, openStorage, S3BlobStore, SweepFencedBlobStore, startJobNotifications } from "@kiln/storage";
import { Command } from "commander";
import { pino } from "pino";
import { adminCommand } from "./admin/admin-commands.js";
import { mintSignInLink } from "./admin/mint-sign-in-link.js";
import { buildApp } from "./build-app.js";
import { configFromEnv, type ServerConfig } from "./config.js";
import { startDogfoodLedgerAudit } from "./domain/dogfood/ledger-audit.js";
import { startImpairmentDetector } from "./domain/hosts/impairment/impairment-detector.js";
import { startArtifactSweeper } from "./domain/jobs/artifact-sweeper.js";
import { CanaryRunner, startCanaryLoop } from "./domain/platform/canaries/canary-runner.js";
import { canarySettings } from "./domain/platform/canaries/canary-settings.js";
import {
  startTenantAnomalyLoop,
  TenantAnomalyEvaluator,
} from "./domain/platform/tenant-anomalies/tenant-anomaly-evaluator.js";
import { startLeaseReaper } from "./domain/scheduler/lease-reaper.js";
import { SecretBox } from "./domain/secrets/secret-box.js";
import { CheckRunReporter } from "./domain/source-hosting/check-run-reporter.js";
import { GitHubApp, gitHubAppConfigFromEnv } from "./domain/source-hosting/github-app.js";
import { startUploadSweeper } from "./domain/sources/upload-sweeper.js";
import { startLineageStorageSampler } from "./domain/usage/lineage-storage-sampler.js";
import { ensureFirstStartTenant } from "./first-start.js";
import { startLocalHost } from "./local-host.js";
import { VERSION } from "./version.js";
import { masterKey } from "./web/auth/operator-credential.js";
import { type HostListener, startHostListener } from "./web/host-protocol/host-listener.js";

/** With port 0 and no KILN_PUBLIC_URL, the origin is known only once a port is chosen. */
async function resolvePort(config: ServerConfig): Promise<number> {
  if (config.port !== 0 || config.publicOrigin !== undefined) return config.port;
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, config.host, resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("could not choose a port");
  return address.port;
}

const program = new Command("kiln-server").description("the kiln control plane").version(VERSION);

program
  .command("serve")
  .description("serve the tenant and operator APIs (KILN_LISTEN, KILN_DATA_DIR, KILN_DATABASE_URL, KILN_PUBLIC_URL)")
  .action(async () => {
    const config = configFromEnv();
    // The data dir holds tenants' sources, records and keys: this user's alone (0700), whatever an
    // earlier version made it. The sandbox reads nothing here by path (its launcher binds, as root).
    mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    chmodSync(config.dataDir, 0o700);
    const port = await resolvePort(config);
    const publicOrigin = config.publicOrigin ?? `http://${config.host}:${port}`;
    // Background work (the local host, the lease reaper, the upload sweeper) logs here.
    const log = pino({ level: process.env.KILN_LOG_LEVEL ?? "info" });
    const storage = await openStorage({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      // On SQLite the WAL is checkpointed by a thread of its own, not in whichever request commits.
      walCheckpointsOffLoop: {
        onFailure: (error) => log.error({ err: error }, "the SQLite WAL checkpointer failed"),
      },
    });
    // KILN_BLOB_URL puts blobs in S3-compatible object storage (several servers share them);
    // without it they stay files under the data directory. Every put is cleared against the
    // artifact retention sweep first (storage's artifact-blobs/). Streamed source parts are staged
    // under the data directory before they go up to a bucket (web/http/received-bytes.ts).
    // The local blob store's root exists from the first start (0700 like the data dir), so
    // readiness's write probe finds it before any blob was written.
    if (config.blobLocation === undefined) mkdirSync(join(config.dataDir, "blobs"), { recursive: true, mode: 0o700 });
    const blobs = new SweepFencedBlobStore(
      config.blobLocation === undefined
        ? new LocalBlobStore(join(config.dataDir, "blobs"))
        : S3BlobStore.at(config.blobLocation, { stagingDirectory: join(config.dataDir, "staging") }),
      { storage, clock: systemClock },
    );
    const secrets = new SecretBox(masterKey(config.dataDir));
    // The source-hosting app, when KILN_GITHUB_APP_* configure one (domain/source-hosting/github-app.ts).
    const gitHubConfig = gitHubAppConfigFromEnv();
    const gitHubApp = gitHubConfig === null ? undefined : new GitHubApp(gitHubConfig, log);
    // Workload health judges canaries by these settings even where this process runs no canary loop.
    // KILN_CANARY_INTERVAL_SECONDS=0: no canaries here, and workload health says it is not measured.
    const canaries = canarySettings({
      intervalSeconds: config.canaryIntervalSeconds || undefined,
      off: config.canaryIntervalSeconds === 0,
    });
    // One listening end per process (storage notifications): log and event streams, the local
    // host's claim wait and the check run reporter wake on what any server process commits.
    const notifications = startJobNotifications(storage, {
      clock: systemClock,
      log,
      enabled: config.notifications,
    });
    // The local host starts after the app; submissions before then wait for its first poll.
    let wake = () => {};
    const deps = {
      storage,
      clock: systemClock,
      version: VERSION,
      publicOrigin,
      blobs,
      secrets,
      ...(gitHubApp === undefined ? {} : { gitHubApp }),
      ...(config.oidc === undefined ? {} : { oidc: config.oidc }),
      wakeScheduler: () => wake(),
      notifications,
      lineageAffinitySeconds: config.lineageAffinitySeconds,
      ...(config.bodyWorkers === undefined ? {} : { bodyWorkers: config.bodyWorkers }),
      ...(config.largeRequestsPerTenant === undefined ? {} : { largeRequestsPerTenant: config.largeRequestsPerTenant }),
      ...(config.tenantIngress === undefined ? {} : { tenantIngress: config.tenantIngress }),
      logger: { level: process.env.KILN_LOG_LEVEL ?? "info" },
      canaries,
      ...(config.dogfoodTenant === undefined ? {} : { dogfoodTenant: config.dogfoodTenant }),
    };
    const app = buildApp(deps);
    let host: Awaited<ReturnType<typeof startLocalHost>> | null = null;
    if (process.env.KILN_LOCAL_HOST !== "off") {
      try {
        host = await startLocalHost(
          {
            storage,
            blobs,
            clock: systemClock,
            log,
            secrets,
            notifications,
            lineageAffinitySeconds: config.lineageAffinitySeconds,
          },
          {
            // Several kiln-servers on one database each run a local host: KILN_LOCAL_HOST_ID names
            // each one's (default "local"), since a host's id is who holds its leases.
            ...(process.env.KILN_LOCAL_HOST_ID ? { hostId: process.env.KILN_LOCAL_HOST_ID } : {}),
            ...(config.localHostVcpus === undefined ? {} : { vcpus: config.localHostVcpus }),
            workRoot: join(config.dataDir, "attempts"),
            crateCache: { root: join(config.dataDir, "crates"), cratesIoIndex: config.cratesIoIndex },
            // KILN_LISTEN's port 0 became `port`: that is the listener the gateway must never reach.
            gateway: {
              ...config.gateway,
              egress: {
                ...config.gateway.egress,
                ownListeners: config.gateway.egress.ownListeners.map((l) =>
                  l.host === config.host && l.port === config.port ? { ...l, port } : l,
                ),
              },
            },
            // KILN_EXECUTOR=auto|microvm|sandbox (auto: a microVM where KVM boots a probe guest).
            isolation: await selectHostIsolation(
              {
                ...isolationSettingsFromEnv(process.env, config.dataDir),
                ...(config.maxAttemptDiskBytes === undefined
                  ? {}
                  : { maxAttemptDiskBytes: config.maxAttemptDiskBytes }),
              },
              { log },
            ),
          },
        );
      } catch (error) {
        // The control plane still serves; jobs wait queued until a host enrolls.
        process.stderr.write(
          `kiln-server: the local host did not start (${error instanceof Error ? error.message : String(error)}); jobs stay queued until a host enrolls\n`,
        );
      }
    }
    if (host !== null) wake = host.wake;
    // Without the embedded host (remote kiln-hosts only), lost leases are still reclaimed here.
    const reaper = host === null ? startLeaseReaper({ storage, clock: systemClock, log }) : null;
    const sweeper = startUploadSweeper({ storage, clock: systemClock, log, stagingDirectory: blobs.stagingDirectory });
    // Hourly samples of lineage bytes: usage's storage byte-hours (issue 16).
    const storageSampler = startLineageStorageSampler({ storage, clock: systemClock, log });
    // The dogfood trial's ledger audit: wrong greens, duplicate executions and charges, outages (issue 19).
    const dogfoodAudit =
      config.dogfoodAuditIntervalSeconds > 0
        ? startDogfoodLedgerAudit(
            { storage, blobs, clock: systemClock, log, dogfoodTenant: config.dogfoodTenant, canaries },
            config.dogfoodAuditIntervalSeconds * 1000,
          )
        : null;
    // Expired artifacts' bytes deleted (KILN_RETENTION_SWEEP_SECONDS; any number of servers may sweep).
    const artifactSweeper =
      config.retentionSweepSeconds > 0
        ? startArtifactSweeper({ storage, blobs, clock: systemClock, log }, config.retentionSweepSeconds * 1000)
        : null;
    // Host impairment: anomalies, incidents, admission closure and automatic recovery (issue 18).
    const impairment = startImpairmentDetector({ storage, clock: systemClock, log });
    // Check runs for jobs submitted with check.head_sha: a pass on every job change (any server
    // process's, through notifications), and every 5 s (retries after provider errors).
    const checkRuns =
      gitHubApp === undefined
        ? null
        : new CheckRunReporter({ storage, blobs, app: gitHubApp, clock: systemClock, log, publicOrigin });
    checkRuns?.start();
    const unsubscribeChecks = checkRuns === null ? () => {} : notifications.onAnyJob(() => checkRuns.nudge());
    // Canaries and tenant anomaly rules start once first start has made its tenant (the canary
    // loop creates the canary tenant, and first start only acts on a database with no tenant).
    let canaryLoop: { stop(): Promise<void> } | null = null;
    let anomalyLoop: { stop(): Promise<void> } | null = null;
    let hostListener: HostListener | null = null;
    const shutdown = async () => {
      await canaryLoop?.stop();
      await anomalyLoop?.stop();
      await sweeper.stop();
      await storageSampler.stop();
      await dogfoodAudit?.stop();
      await artifactSweeper?.stop();
      await impairment.loop.stop();
      await reaper?.stop();
      unsubscribeChecks();
      await checkRuns?.stop();
      await host?.stop();
      await hostListener?.close();
      await app.close();
      await notifications.stop();
      await storage.close();
      process.exit(0);
    };
    process.once("SIGINT", shutdown);
    process.once("SIGTERM", shutdown);
    const address = await app.listen({ host: config.host, port });
    // KILN_HOST_LISTEN: remote kiln-hosts speak the host protocol here, mutual TLS (off by default).
    hostListener =
      config.hostListen === undefined
        ? null
        : await startHostListener(deps, {
            ...config.hostListen,
            names: config.hostTlsNames,
            certificateLifetimeSeconds: config.hostCertificateSeconds,
            log,
          });
    const first = await ensureFirstStartTenant(storage, systemClock.now());
    if (config.canaryIntervalSeconds > 0) {
      // A host's failed or late canary is an impairment of that host.
      const runner = new CanaryRunner({
        storage,
        clock: systemClock,
        log,
        settings: canaries,
        app,
        onCanaryFailure: (failure) => impairment.detector.reportCanaryFailure(failure),
      });
      canaryLoop = startCanaryLoop(runner, { clock: systemClock, log, settings: canaries });
    }
    if (config.anomalyIntervalSeconds > 0) {
      const evaluator = new TenantAnomalyEvaluator({ storage, clock: systemClock });
      anomalyLoop = startTenantAnomalyLoop(evaluator, {
        clock: systemClock,
        log,
        intervalSeconds: config.anomalyIntervalSeconds,
      });
    }
    const where = config.databaseUrl === undefined ? `data dir ${config.dataDir}` : "PostgreSQL";
    const out = (line: string) => process.stdout.write(`${line}\n`);
    out(`kiln ${VERSION} serving ${address} (${where}) on Node.js ${process.version}`);
    out(`  OpenAPI document: ${publicOrigin}/api/openapi.json`);
    if (hostListener !== null) {
      out(
        `  host listener (mutual TLS): ${hostListener.origin} for ${config.hostTlsNames.join(", ")}; host CA sha256 ${hostListener.ca.certificateSha256}`,
      );
    }
    if (first !== null) {
      const link = await mintSignInLink(storage, publicOrigin, first.email, first.tenant, systemClock);
      out(`  first start: created tenant ${first.tenant} with owner ${first.email}`);
      out(`  sign in to the dashboard (one-time link, 24 hours): ${link}`);
      out(`  more links: kiln-server admin sign-in-link ${first.email}`);
      out(`  log the CLI in: kiln login --server ${publicOrigin} (approve the code it shows while signed in)`);
    }
  });

program.addCommand(
  adminCommand(() => {
    const config = configFromEnv();
    return { config, open: () => openStorage({ dataDir: config.dataDir, databaseUrl: config.databaseUrl }) };
  }),
);

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`kiln-server: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
