import { resolve } from "node:path";
import { cratesIoIndexOf, type GatewayEgressSettings, gatewayEgressOf } from "@kiln/host";
import { parseS3BlobUrl, type S3BlobLocation } from "@kiln/storage";
import { DEFAULT_LINEAGE_AFFINITY_SECONDS } from "./domain/hosts/lineage-affinity.js";
import { CANARY_TENANT } from "./domain/platform/platform-tenants.js";
import { DEFAULT_ANOMALY_INTERVAL_SECONDS } from "./domain/platform/tenant-anomalies/tenant-anomaly-evaluator.js";
import type { OidcSettings } from "./web/auth/oidc-client.js";
import type { TenantIngress } from "./web/http/tenant-ingress-shaper.js";

/** The harness contract of DESIGN.md §7: KILN_LISTEN, KILN_DATA_DIR, KILN_DATABASE_URL. */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** KILN_PUBLIC_URL: where people and devices reach kiln; defaults to the listen address. */
  readonly publicOrigin: string | undefined;
  /**
   * KILN_CRATES_IO_INDEX: the sparse index standing for crates.io in the dependency gateway
   * (a mirror; a test registry); downloads follow its config.json `dl`.
   */
  readonly cratesIoIndex: string;
  /**
   * KILN_GATEWAY_ALLOW, KILN_GATEWAY_GIT_SSH, KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS and
   * KILN_GATEWAY_CA_FILE: what the gateway may reach for a tenant besides the public internet
   * (`gatewayEgressOf`); kiln's own listeners (KILN_LISTEN, KILN_HOST_LISTEN) are never reached.
   */
  readonly gateway: GatewayEgressSettings;
  /**
   * KILN_OIDC_ISSUER, KILN_OIDC_CLIENT_ID, KILN_OIDC_CLIENT_SECRET (all three or none) and
   * KILN_OIDC_GROUPS_CLAIM (default `groups`), KILN_OIDC_PROVIDER_VERIFIES_EMAILS (default off):
   * OpenID Connect sign-in; undefined without an issuer.
   */
  readonly oidc: OidcSettings | undefined;
  /**
   * KILN_CANARY_INTERVAL_SECONDS (default 300; 0 turns the canary loop off in this process):
   * a canary is due on every serving host once per interval (platform/canaries/).
   */
  readonly canaryIntervalSeconds: number;
  /**
   * KILN_LINEAGE_AFFINITY_SECONDS (default DEFAULT_LINEAGE_AFFINITY_SECONDS, 45; 0 never waits):
   * how long a queued job waits for the live host holding its lineage before any host takes it.
   */
  readonly lineageAffinitySeconds: number;
  /**
   * KILN_NOTIFICATIONS (default on): streams and the local host's claim wait are woken by
   * LISTEN/NOTIFY; `off` makes them poll (a connection pooler in transaction mode cannot hold a
   * LISTEN session).
   */
  readonly notifications: boolean;
  /** KILN_ANOMALY_INTERVAL_SECONDS (default 300; 0 off): how often the tenant anomaly rules run. */
  readonly anomalyIntervalSeconds: number;
  /** KILN_DOGFOOD_TENANT: the tenant the dogfood trial observes (default DEFAULT_DOGFOOD_TENANT). */
  readonly dogfoodTenant: string | undefined;
  /** KILN_DOGFOOD_AUDIT_INTERVAL_SECONDS (default 300; 0 off): how often the trial's ledger audit runs. */
  readonly dogfoodAuditIntervalSeconds: number;
  /** KILN_RETENTION_SWEEP_SECONDS (default 3600; 0 off): how often expired artifacts' bytes are deleted. */
  readonly retentionSweepSeconds: number;
  /** KILN_BODY_WORKERS (default one or two: the cores the event loop leaves; 0 none): threads reading large JSON bodies. */
  readonly bodyWorkers: number | undefined;
  /** KILN_LARGE_REQUESTS_PER_TENANT (default 2, at least 1): one tenant's large requests in flight in this process. */
  readonly largeRequestsPerTenant: number | undefined;
  /** KILN_MAX_ATTEMPT_DISK_BYTES (at least 1 MiB): the most disk one attempt of the embedded host may take. */
  readonly maxAttemptDiskBytes: number | undefined;
  /** KILN_LOCAL_HOST_VCPUS (at least 1; default the machine's): the vCPUs the embedded host offers. */
  readonly localHostVcpus: number | undefined;
  /**
   * KILN_TENANT_INGRESS_BYTES_PER_SECOND and KILN_TENANT_INGRESS_BURST_BYTES (default
   * DEFAULT_TENANT_INGRESS): each tenant's bodies read at most this fast while another tenant is
   * served; undefined (a rate of 0) reads them as fast as they come.
   */
  readonly tenantIngress: TenantIngress | undefined;
  /**
   * KILN_BLOB_URL (`s3://bucket/prefix?endpoint=…&region=…&force_path_style=true`): blobs in
   * S3-compatible object storage, credentials from the AWS SDK chain; undefined keeps them as
   * files under KILN_DATA_DIR/blobs (the embedded default).
   */
  readonly blobLocation: S3BlobLocation | undefined;
  /**
   * KILN_HOST_LISTEN (host:port): the host protocol's own HTTPS listener for remote kiln-hosts,
   * mutual TLS with certificates from kiln's CA (web/host-protocol/host-listener.ts); undefined (the
   * default) serves no remote host, the embedded default being one in-process host.
   */
  readonly hostListen: { host: string; port: number } | undefined;
  /**
   * KILN_HOST_TLS_NAMES (comma-separated DNS names and IP addresses): what the host listener's
   * server certificate is valid for; default the public URL's host, `localhost` and `127.0.0.1`.
   */
  readonly hostTlsNames: readonly string[];
  /** KILN_HOST_CERTIFICATE_SECONDS (default 604800, 7 days): how long a host's client certificate is valid. */
  readonly hostCertificateSeconds: number;
}

/** A whole number of seconds from the environment: `fallback` when unset, 0 for off. */
function secondsFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name]?.trim();
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number of seconds, got ${text}`);
  return value;
}

function countFromEnv(env: NodeJS.ProcessEnv, name: string, least: number): number | undefined {
  const text = env[name]?.trim();
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < least)
    throw new Error(`${name} must be a whole number of at least ${least}, got ${text}`);
  return value;
}

/**
 * The per-tenant ingress bound while this process serves more than one tenant
 * (web/http/tenant-ingress-shaper.ts), chosen by reliability trial T15's sweep on a two-core
 * machine (docs/reliability.md): of the rates swept, the fastest at which a noisy tenant left
 * another's p99 within its promise in most runs on both engines (every run on SQLite). The burst
 * lets an ordinary body (a submission, a manifest of a few thousand files) through at once; a
 * larger one let a whole large body in as one stall of the event loop. The platform's own
 * canaries (every few minutes, through app.inject) do not make the process shared: they would
 * hold a lone user's uploads to the shared rate for the window after each of them.
 */
export const DEFAULT_TENANT_INGRESS: TenantIngress = {
  bytesPerSecond: 2 ** 20,
  burstBytes: 2 ** 20,
  unsharedTenants: [CANARY_TENANT],
};

/** KILN_TENANT_INGRESS_BYTES_PER_SECOND (0: unbounded) and KILN_TENANT_INGRESS_BURST_BYTES. */
function tenantIngressFromEnv(env: NodeJS.ProcessEnv): TenantIngress | undefined {
  const bytesPerSecond =
    countFromEnv(env, "KILN_TENANT_INGRESS_BYTES_PER_SECOND", 0) ?? DEFAULT_TENANT_INGRESS.bytesPerSecond;
  if (bytesPerSecond === 0) return undefined;
  const burstBytes = countFromEnv(env, "KILN_TENANT_INGRESS_BURST_BYTES", 1) ?? DEFAULT_TENANT_INGRESS.burstBytes;
  return { bytesPerSecond, burstBytes, unsharedTenants: DEFAULT_TENANT_INGRESS.unsharedTenants };
}

function onOffFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const text = env[name]?.trim().toLowerCase();
  if (text === undefined || text === "") return fallback;
  if (text === "on") return true;
  if (text === "off") return false;
  throw new Error(`${name} must be on or off, got ${text}`);
}

/** The identity provider from the environment: all of issuer, client id and secret, or none. */
export function oidcFromEnv(env: NodeJS.ProcessEnv): OidcSettings | undefined {
  const issuer = env.KILN_OIDC_ISSUER?.trim() || undefined;
  const clientId = env.KILN_OIDC_CLIENT_ID?.trim() || undefined;
  const clientSecret = env.KILN_OIDC_CLIENT_SECRET?.trim() || undefined;
  if (issuer === undefined && clientId === undefined && clientSecret === undefined) return undefined;
  if (issuer === undefined || clientId === undefined || clientSecret === undefined) {
    throw new Error("OpenID Connect needs all of KILN_OIDC_ISSUER, KILN_OIDC_CLIENT_ID and KILN_OIDC_CLIENT_SECRET");
  }
  const url = new URL(issuer);
  const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
  if (url.protocol !== "https:" && !(url.protocol === "http:" && loopback)) {
    throw new Error("KILN_OIDC_ISSUER must be an https:// URL (http:// only on the loopback interface)");
  }
  return {
    issuer,
    clientId,
    clientSecret,
    groupsClaim: env.KILN_OIDC_GROUPS_CLAIM?.trim() || "groups",
    providerVerifiesEmails: onOffFromEnv(env, "KILN_OIDC_PROVIDER_VERIFIES_EMAILS", false),
  };
}

export function parseListen(value: string, name = "KILN_LISTEN"): { host: string; port: number } {
  const match = /^(\[[0-9a-fA-F:]+\]|[^:]+):(\d{1,5})$/.exec(value.trim());
  const port = Number(match?.[2]);
  if (match?.[1] === undefined || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`${name} must be host:port, got ${JSON.stringify(value)}`);
  }
  return { host: match[1].replace(/^\[|\]$/g, ""), port };
}

/** The host listener's certificate names: KILN_HOST_TLS_NAMES, else the public URL's host and the loopback names. */
function hostTlsNamesFromEnv(env: NodeJS.ProcessEnv, publicOrigin: string | undefined): string[] {
  const configured = env.KILN_HOST_TLS_NAMES?.split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  if (configured !== undefined && configured.length > 0) return [...new Set(configured)];
  const publicHost = publicOrigin === undefined ? [] : [new URL(publicOrigin).hostname.replace(/^\[|\]$/g, "")];
  return [...new Set([...publicHost, "localhost", "127.0.0.1"])];
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const { host, port } = parseListen(env.KILN_LISTEN ?? "127.0.0.1:7860");
  const databaseUrl = env.KILN_DATABASE_URL?.trim() || undefined;
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new Error("KILN_DATABASE_URL must be a postgres:// URL (unset it for the embedded SQLite default)");
  }
  const publicUrl = env.KILN_PUBLIC_URL?.trim() || undefined;
  let publicOrigin: string | undefined;
  if (publicUrl !== undefined) {
    const url = new URL(publicUrl);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("KILN_PUBLIC_URL must be http(s)://");
    publicOrigin = url.origin;
  } else if (port !== 0) {
    publicOrigin = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  }
  const cratesIoIndex = cratesIoIndexOf(env);
  const hostListen = env.KILN_HOST_LISTEN?.trim() ? parseListen(env.KILN_HOST_LISTEN, "KILN_HOST_LISTEN") : undefined;
  const gateway = gatewayEgressOf(env, [{ host, port }, ...(hostListen === undefined ? [] : [hostListen])]);
  return {
    host,
    port,
    dataDir: resolve(env.KILN_DATA_DIR ?? "./.kiln"),
    databaseUrl,
    publicOrigin,
    cratesIoIndex,
    gateway,
    oidc: oidcFromEnv(env),
    canaryIntervalSeconds: secondsFromEnv(env, "KILN_CANARY_INTERVAL_SECONDS", 300),
    anomalyIntervalSeconds: secondsFromEnv(env, "KILN_ANOMALY_INTERVAL_SECONDS", DEFAULT_ANOMALY_INTERVAL_SECONDS),
    lineageAffinitySeconds: secondsFromEnv(env, "KILN_LINEAGE_AFFINITY_SECONDS", DEFAULT_LINEAGE_AFFINITY_SECONDS),
    notifications: onOffFromEnv(env, "KILN_NOTIFICATIONS", true),
    dogfoodTenant: env.KILN_DOGFOOD_TENANT?.trim() || undefined,
    dogfoodAuditIntervalSeconds: secondsFromEnv(env, "KILN_DOGFOOD_AUDIT_INTERVAL_SECONDS", 300),
    retentionSweepSeconds: secondsFromEnv(env, "KILN_RETENTION_SWEEP_SECONDS", 3600),
    bodyWorkers: countFromEnv(env, "KILN_BODY_WORKERS", 0),
    maxAttemptDiskBytes: countFromEnv(env, "KILN_MAX_ATTEMPT_DISK_BYTES", 2 ** 20),
    localHostVcpus: countFromEnv(env, "KILN_LOCAL_HOST_VCPUS", 1),
    largeRequestsPerTenant: countFromEnv(env, "KILN_LARGE_REQUESTS_PER_TENANT", 1),
    tenantIngress: tenantIngressFromEnv(env),
    blobLocation: env.KILN_BLOB_URL?.trim() ? parseS3BlobUrl(env.KILN_BLOB_URL.trim()) : undefined,
    hostListen,
    hostTlsNames: hostTlsNamesFromEnv(env, publicOrigin),
    hostCertificateSeconds: secondsFromEnv(env, "KILN_HOST_CERTIFICATE_SECONDS", 7 * 24 * 3600) || 7 * 24 * 3600,
  };
}
