/**
 * Shared pieces of the end-to-end job tests that run real cargo in the real sandbox:
 * an HTTP-level jobs client (over `app.inject` or a real listening server), crates
 * from inline text, and host-side process inspection.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger, systemClock, TERMINAL_JOB_STATUSES } from "@kiln/contract";
import {
  createSandboxExecutor,
  type Executor,
  type GatewayEgressSettings,
  type HostIsolation,
  sandboxIsolation,
} from "@kiln/host";
import { type BlobStore, onboardRepository, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../build-app.js";
import { SecretBox } from "../domain/secrets/secret-box.js";
import { type LocalHostEvent, startLocalHost } from "../local-host.js";
import type { AppDeps } from "../web/http/app-deps.js";
import { type SourceFile, sorted } from "./crates.js";
import { bearer, personWithToken, testBlobs } from "./harness.js";
import { inlineSubmission } from "./job-fixtures.js";

// biome-ignore lint/suspicious/noExplicitAny: job documents are read loosely; checkResponses validates them.
export type Doc = any;

/** A crate from path → text (Cargo.toml generated unless given), sorted as submissions require. */
export function crate(name: string, files: Record<string, string>): SourceFile[] {
  const all: Record<string, string> = {
    "Cargo.toml": `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n`,
    ...files,
  };
  return sorted(
    Object.entries(all).map(([path, text]) => ({ path, bytes: [...Buffer.from(text)], executable: false })),
  );
}

export interface ApiResponse {
  status: number;
  headers: Record<string, string | number | string[] | undefined>;
  body: string;
  json(): Doc;
}

/** One request to the tenant API as the test's person. */
export type Api = (
  method: "GET" | "POST",
  url: string,
  opts?: { body?: unknown; key?: string },
) => Promise<ApiResponse>;

export function injectApi(app: FastifyInstance, token: string): Api {
  return async (method, url, opts = {}) => {
    const res = await app.inject({
      method,
      url,
      headers: {
        ...bearer(token),
        ...(opts.body === undefined ? {} : { "content-type": "application/json" }),
        ...(opts.key === undefined ? {} : { "idempotency-key": opts.key }),
      },
      ...(opts.body === undefined ? {} : { payload: JSON.stringify(opts.body) }),
    });
    return { status: res.statusCode, headers: res.headers, body: res.body, json: () => JSON.parse(res.body) };
  };
}

export function fetchApi(baseUrl: string, token: string): Api {
  return async (method, url, opts = {}) => {
    const res = await fetch(`${baseUrl}${url}`, {
      method,
      headers: {
        ...bearer(token),
        ...(opts.body === undefined ? {} : { "content-type": "application/json" }),
        ...(opts.key === undefined ? {} : { "idempotency-key": opts.key }),
      },
      ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
    });
    const body = await res.text();
    return { status: res.status, headers: Object.fromEntries(res.headers), body, json: () => JSON.parse(body) };
  };
}

/** The jobs operations the end-to-end tests use, over any Api. */
export class Jobs {
  constructor(
    readonly api: Api,
    readonly repository = "acme/widget",
  ) {}

  async submit(
    files: SourceFile[],
    key: string,
    invocation: Record<string, unknown> = {},
    size = "kiln2-cpu",
  ): Promise<string> {
    const res = await this.api("POST", "/api/v4/jobs", {
      key,
      body: inlineSubmission(this.repository, "test", files, { size, invocation }),
    });
    assert.equal(res.status, 200, res.body);
    return res.json() as string;
  }

  async get(id: string): Promise<Doc> {
    const res = await this.api("GET", `/api/jobs/${id}`);
    assert.equal(res.status, 200, res.body);
    return res.json();
  }

  /** Polls the job until `until` holds; throws naming the last status after `timeoutMs`. */
  async waitFor(id: string, until: (job: Doc) => boolean, timeoutMs: number, everyMs = 100): Promise<Doc> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = await this.get(id);
      if (until(job)) return job;
      if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status} after ${timeoutMs} ms`);
      await sleep(everyMs);
    }
  }

  settle(id: string, timeoutMs = 240_000): Promise<Doc> {
    return this.waitFor(id, (job) => TERMINAL_JOB_STATUSES.has(job.status), timeoutMs, 200);
  }

  /** JobEvidence over HTTP. */
  async evidence(id: string): Promise<Doc> {
    const res = await this.api("GET", `/api/jobs/${id}/evidence`);
    assert.equal(res.status, 200, res.body);
    return res.json();
  }

  /** Every log line of the job, `stream: text`, in order. */
  async logText(id: string): Promise<string> {
    const lines: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 1000; page++) {
      const res = await this.api("GET", `/api/jobs/${id}/logs?limit=1000${cursor === null ? "" : `&cursor=${cursor}`}`);
      assert.equal(res.status, 200, res.body);
      const doc = res.json();
      for (const r of doc.records) lines.push(`[a${r.attempt} ${r.stream}] ${r.text}`);
      if (doc.next_cursor === null || doc.records.length === 0) break;
      cursor = doc.next_cursor;
    }
    return lines.join("\n");
  }

  cancel(id: string, key: string): Promise<ApiResponse> {
    return this.api("POST", `/api/jobs/${id}/cancel`, { key });
  }

  retry(id: string, key: string): Promise<ApiResponse> {
    return this.api("POST", `/api/jobs/${id}/retry`, { key });
  }
}

/** What a failed end-to-end assertion should show: status, failure, tests that did not pass, the log's tail. */
export async function explainJob(jobs: Jobs, id: string): Promise<string> {
  const job = await jobs.get(id);
  let tests = "";
  let units = "";
  try {
    const evidence = await jobs.evidence(id);
    tests = JSON.stringify(
      (evidence.report.tests as Doc[]).map((t) => `${t.attempt}:${t.target}:${t.name}=${t.outcome}`),
    );
    units = JSON.stringify(evidence.report.units);
  } catch (error) {
    tests = `(no evidence: ${String(error)})`;
  }
  const log = (await jobs.logText(id)).split("\n").slice(-60).join("\n");
  return `job ${id} ${job.status} failure=${JSON.stringify(job.failure)}\ntransitions=${JSON.stringify(
    job.transitions,
  )}\ntests=${tests}\nunits=${units}\n--- log tail\n${log}`;
}

/** The embedded default (SQLite, local host on a real sandbox executor) as run-jobs.sandbox.test.ts builds it. */
export interface Embedded {
  storage: Storage;
  blobs: BlobStore;
  app: FastifyInstance;
  jobs: Jobs;
  token: string;
  tenant: string;
  workRoot: string;
  lineageRoot: string;
  /** The embedded host's dependency-gateway crate cache (content-addressed `<scope>/<sha[0:2]>/<sha>.crate`). */
  crateRoot: string;
  /** The master-key box the app seals tenants' registry credentials with and the host service opens them with. */
  secrets: SecretBox;
  /** Every failure and attempt end the embedded host reported, in order. */
  events: LocalHostEvent[];
  /** Starts the embedded host when startEmbedded was asked to hold it (no-op otherwise). */
  startHost(): Promise<void>;
  /** Another app on the same storage and host (e.g. another platform wall-clock ceiling). */
  extraApp(options: { wallClockSeconds?: number }): Promise<Jobs>;
  close(): Promise<void>;
}

export async function startEmbedded(
  options: {
    wallClockSeconds?: number;
    executor?: Executor;
    /** The whole isolation (a microVM host); `executor` replaces only the sandbox's executor. */
    isolation?: HostIsolation;
    workRoot?: string;
    storageQuotaBytes?: number;
    /** The sparse index standing for crates.io in the host's dependency gateway (a test registry). */
    cratesIoIndex?: string;
    /**
     * The gateway's egress allowances, as an operator sets them (`gatewayEgressOf` of KILN_GATEWAY_*):
     * a tenant's registry or git server on loopback is reached only where they allow it.
     */
    gateway?: GatewayEgressSettings;
    /** Seals and opens registry credentials (default: a fresh box under a random key), as main.ts wires its master key. */
    secrets?: SecretBox;
    /** The origin browsers reach the app at (default `http://kiln.test`, which no browser reaches). */
    publicOrigin?: string;
    /** OpenID Connect sign-in for the dashboard (default: none). */
    oidc?: AppDeps["oidc"];
    /** Leave the host stopped until `startHost()`, so a test sees its jobs queued first. */
    holdHost?: boolean;
    /** The blob store app and host share (default: local files in a fresh directory). */
    blobs?: BlobStore;
    /** The database (closed with the rest; default: a fresh SQLite one), e.g. a DIALECTS PostgreSQL one. */
    storage?: Storage;
  } = {},
): Promise<Embedded> {
  const storage = options.storage ?? (await openSqliteForTest());
  const blobs = options.blobs ?? testBlobs();
  const ownWorkRoot = options.workRoot === undefined;
  const workRoot = options.workRoot ?? mkdtempSync(join(tmpdir(), "kiln-e2e-attempts-"));
  // Warm lineages in a directory of this test's own (the default, beside the work root, would be the shared tmpdir).
  const lineageRoot = mkdtempSync(join(tmpdir(), "kiln-e2e-lineages-"));
  const crateRoot = mkdtempSync(join(tmpdir(), "kiln-e2e-crates-"));
  const secrets = options.secrets ?? new SecretBox(randomBytes(32));
  let wake = () => {};
  const quota = options.storageQuotaBytes === undefined ? {} : { storageQuotaBytes: options.storageQuotaBytes };
  const apps: FastifyInstance[] = [];
  const events: LocalHostEvent[] = [];
  const makeApp = async (wallClockSeconds: number | undefined) => {
    const app = buildApp({
      storage,
      blobs,
      clock: systemClock,
      version: "test",
      publicOrigin: options.publicOrigin ?? "http://kiln.test",
      secrets,
      ...(options.oidc === undefined ? {} : { oidc: options.oidc }),
      checkResponses: true,
      wakeScheduler: () => wake(),
      ...(wallClockSeconds === undefined ? {} : { wallClockSeconds }),
      ...quota,
    });
    await app.ready();
    apps.push(app);
    return app;
  };
  const app = await makeApp(options.wallClockSeconds);
  let host: Awaited<ReturnType<typeof startLocalHost>> | undefined;
  const startHost = async () => {
    if (host !== undefined) return;
    host = await startLocalHost(
      { storage, blobs, clock: systemClock, log: silentLogger, secrets, ...quota },
      {
        workRoot,
        lineageRoot,
        // Several attempts at once on a two-core machine, as before the default became the machine's.
        vcpus: 16,
        isolation: options.isolation ?? sandboxIsolation({ executor: options.executor ?? createSandboxExecutor() }),
        crateCache: {
          root: crateRoot,
          cratesIoIndex: options.cratesIoIndex ?? "sparse+http://127.0.0.1:9/index/",
        },
        ...(options.gateway === undefined ? {} : { gateway: options.gateway }),
        onEvent: (event) => events.push(event),
      },
    );
    wake = host.wake;
  };
  if (options.holdHost !== true) await startHost();
  const member = await personWithToken(storage, { role: "member", now: new Date() });
  await onboardRepository(storage, { tenantId: member.tenant, name: "acme/widget", onboardedBy: "test" }, new Date());
  return {
    storage,
    blobs,
    app,
    jobs: new Jobs(injectApi(app, member.token)),
    token: member.token,
    tenant: member.tenant,
    workRoot,
    lineageRoot,
    crateRoot,
    secrets,
    events,
    startHost,
    extraApp: async ({ wallClockSeconds }) => new Jobs(injectApi(await makeApp(wallClockSeconds), member.token)),
    close: async () => {
      await host?.stop();
      for (const a of apps) await a.close();
      await storage.close();
      if (ownWorkRoot) rmSync(workRoot, { recursive: true, force: true });
      rmSync(lineageRoot, { recursive: true, force: true });
      rmSync(crateRoot, { recursive: true, force: true });
    },
  };
}

/**
 * The real sandbox executor, noting when each attempt's abort signal fired (the moment the
 * executor learns of a cancellation).
 */
export function observedSandboxExecutor(): { executor: Executor; abortedAt: Map<string, number> } {
  const real = createSandboxExecutor();
  const abortedAt = new Map<string, number>();
  return {
    abortedAt,
    executor: {
      isolation: real.isolation,
      run: (request) => {
        const note = () => abortedAt.set(request.attemptId, Date.now());
        if (request.signal.aborted) note();
        else request.signal.addEventListener("abort", note, { once: true });
        return real.run(request);
      },
    },
  };
}

export interface HostProcess {
  pid: number;
  cmdline: string;
}

/**
 * Every process on the host (never this one) whose command line, or whose environment,
 * carries `marker`: a job that declares KILN_MARKER=<marker> marks every process it
 * starts, sleeping grandchildren and setsid'd daemons included.
 */
export async function processesCarrying(marker: string): Promise<HostProcess[]> {
  const found: HostProcess[] = [];
  for (const entry of await readdir("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, "utf8")).replaceAll("\0", " ").trim();
      let environ = "";
      try {
        environ = await readFile(`/proc/${pid}/environ`, "utf8");
      } catch {
        // A kernel thread or a process that just exited.
      }
      if (cmdline.includes(marker) || environ.includes(marker)) found.push({ pid, cmdline });
    } catch {
      // The process exited while we looked.
    }
  }
  return found;
}

/** Polls until no process carries `marker`; resolves the instant that was first seen, or null at the deadline. */
export async function waitUntilNoneCarry(marker: string, timeoutMs: number): Promise<number | null> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() <= deadline) {
    if ((await processesCarrying(marker)).length === 0) return Date.now();
    await sleep(50);
  }
  return null;
}

/** Polls until some process's command line contains `needle`. */
export async function waitForProcess(needle: string, timeoutMs: number): Promise<HostProcess[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await processesCarrying(needle)).filter((p) => p.cmdline.includes(needle));
    if (found.length > 0) return found;
    if (Date.now() > deadline) throw new Error(`no process with ${needle} in its command line after ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** The statuses a job moved to, in order. */
export const transitionsTo = (job: Doc): string[] => (job.transitions as Doc[]).map((t) => t.to);
