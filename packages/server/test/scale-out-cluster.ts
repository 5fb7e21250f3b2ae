/**
 * A scale-out deployment on this machine, for the end-to-end test (scale-out.process.test.ts) and the
 * benchmark (bench/jobs-per-minute.mjs imports this file from dist): N real `kiln-server serve`
 * processes without an embedded host (KILN_LOCAL_HOST=off) on one PostgreSQL database and one
 * S3-compatible bucket (a real s3rver on loopback, KILN_BLOB_URL), sharing one master key, each
 * with its own API listener (KILN_LISTEN) and host listener (KILN_HOST_LISTEN, mutual TLS); and
 * M real `kiln-host` processes (the package's bin: the bubblewrap sandbox, real cargo), each with
 * its own data directory, enrolled with a one-time token against the CA digest the servers
 * print, and speaking the host protocol over HTTPS to one server's host listener (host i to
 * server i mod N unless told otherwise). Every listener has a fixed loopback port, so a process
 * killed with SIGKILL starts again where its peers expect it.
 *
 * CPU seconds of every process are read from /proc (utime + stime of the process and of the
 * children it waited for), so a benchmark can tell the control plane's share from the hosts'.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HEALTH_REPORTED_MESSAGE } from "@kiln/host";
import { KILN_HOST_BIN } from "@kiln/host/testing";
import { onboardRepository, openStorage, type Storage } from "@kiln/storage";
import { createPostgresTestDatabase, type S3TestServer, startS3TestServer } from "@kiln/storage/testing";
import { mintHostEnrollmentToken } from "../src/domain/hosts/host-identities.js";
import { type Api, fetchApi } from "../src/testing/e2e-jobs.js";
import { personWithToken } from "../src/testing/harness.js";
import { operatorCredential } from "../src/web/auth/operator-credential.js";
import { type ServerProcess, startServerProcess, stopServerProcess } from "./server-process.js";

/** What a process keeps of its output for failure messages. */
const OUTPUT_KEPT = 200_000;
/** Linux's USER_HZ: /proc/<pid>/stat counts CPU time in these ticks. */
const CLOCK_TICKS_PER_SECOND = 100;

export interface ScaleOutClusterOptions {
  readonly servers: number;
  readonly hosts: number;
  /** KILN_HOST_VCPUS of every host (default 2: one kiln2-cpu job at a time). */
  readonly hostVcpus?: number;
  /** Extra environment for every kiln-server (e.g. KILN_LINEAGE_AFFINITY_SECONDS). */
  readonly serverEnv?: Readonly<Record<string, string>>;
  /** Which server's host listener host `index` speaks to (default index mod servers). */
  readonly serverOfHost?: (index: number) => number;
  /** Start the hosts too (default true); otherwise each waits for its own start(). */
  readonly startHosts?: boolean;
  /** Prefix of the host ids (default "builder": builder-1, builder-2, …). */
  readonly hostIdPrefix?: string;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/**
 * CPU seconds of a live process and of its children it has waited for (fields 14–17 of
 * /proc/<pid>/stat: utime, stime, cutime, cstime); null once it is gone.
 */
export function cpuSecondsOf(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces; the fields after it follow its closing parenthesis.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  // fields[0] is field 3 (state), so field n is fields[n - 3].
  const ticks = [14, 15, 16, 17].reduce((sum, n) => sum + Number(fields[n - 3] ?? 0), 0);
  return ticks / CLOCK_TICKS_PER_SECOND;
}

/**
 * CPU seconds of the live PostgreSQL backends serving `database` (their process title names it):
 * the database's share of the control plane. Backends that already exited are not counted.
 */
export function postgresCpuSecondsOf(database: string): number {
  let total = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let title: string;
    try {
      title = readFileSync(`/proc/${entry}/cmdline`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    if (title.startsWith("postgres:") && title.includes(` ${database} `)) total += cpuSecondsOf(Number(entry)) ?? 0;
  }
  return total;
}

/** One kiln-server of the cluster: started, stopped (SIGTERM), killed (SIGKILL), started again on its ports. */
export class ClusterServer {
  #process: ServerProcess | undefined;
  #earlierOutput = "";

  constructor(
    readonly name: string,
    readonly port: number,
    readonly hostPort: number,
    private readonly env: Record<string, string>,
  ) {}

  /** The tenant and operator APIs: `http://127.0.0.1:<port>`. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  /** The host listener, what a kiln-host's KILN_ENDPOINT names. */
  get hostOrigin(): string {
    return `https://127.0.0.1:${this.hostPort}`;
  }
  get pid(): number | undefined {
    return this.#process?.child.pid;
  }
  running(): boolean {
    const child = this.#process?.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }
  /** The CA's SHA-256 the server printed beside its host listener. */
  caSha256(): string {
    const match = /host CA sha256 ([0-9a-f]{64})/.exec(this.output());
    assert.ok(match?.[1] !== undefined, `${this.name} printed no host listener: ${this.output()}`);
    return match[1];
  }
  output(): string {
    return (this.#earlierOutput + (this.#process?.output() ?? "")).slice(-OUTPUT_KEPT);
  }
  cpuSeconds(): number | null {
    return cpuSecondsOf(this.pid);
  }

  async start(): Promise<void> {
    assert.ok(!this.running(), `${this.name} is running`);
    this.#earlierOutput = this.output();
    const started = await startServerProcess(this.env);
    this.#process = started;
    // The host listener's line follows the "serving" line that startServerProcess waits for.
    while (!/host CA sha256 [0-9a-f]{64}/.test(started.output())) {
      const stdout = started.child.stdout;
      assert.ok(stdout !== null && this.running(), `${this.name} stopped: ${started.output()}`);
      // Checked and subscribed in one turn: no output can arrive in between.
      await once(stdout, "data");
    }
  }
  async stop(): Promise<void> {
    await stopServerProcess(this.#process, "SIGTERM");
  }
  async kill(): Promise<void> {
    await stopServerProcess(this.#process, "SIGKILL");
  }
}

/** One kiln-host of the cluster: started (ready once its first health report reached kiln), stopped, killed, started again. */
export class ClusterHost {
  #child: ChildProcess | undefined;
  #output = "";

  constructor(
    readonly id: string,
    /** The server whose host listener it speaks to. */
    readonly server: ClusterServer,
    readonly dataDir: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  get pid(): number | undefined {
    return this.#child?.pid;
  }
  running(): boolean {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }
  output(): string {
    return this.#output;
  }
  /** CPU seconds of the kiln-host and of the attempts' processes it waited for (bwrap, cargo, rustc, tests). */
  cpuSeconds(): number | null {
    return cpuSecondsOf(this.pid);
  }

  /**
   * Starts the bin and resolves once it reported its health to the control plane (it enrolled,
   * or found its certificate, and serves); rejects with its output if it exits first.
   */
  async start(): Promise<void> {
    assert.ok(!this.running(), `${this.id} is running`);
    const child = spawn(process.execPath, [KILN_HOST_BIN], { env: this.env, stdio: ["ignore", "pipe", "pipe"] });
    this.#child = child;
    let fresh = "";
    await new Promise<void>((resolve, reject) => {
      const look = (chunk: Buffer) => {
        const text = chunk.toString("utf8");
        this.#output = (this.#output + text).slice(-OUTPUT_KEPT);
        fresh += text;
        if (fresh.includes(HEALTH_REPORTED_MESSAGE)) {
          fresh = "";
          resolve();
        }
      };
      child.stdout?.on("data", look);
      child.stderr?.on("data", look);
      child.once("exit", (code, signal) =>
        reject(new Error(`${this.id} exited (${code ?? signal}) before it served:\n${this.#output.slice(-4000)}`)),
      );
    });
  }

  /** SIGTERM: it stops claiming and waits for its running attempts (SIGKILL after `graceMs`). */
  async stop(graceMs = 120_000): Promise<void> {
    const child = this.#child;
    if (child === undefined || !this.running()) return;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), graceMs).unref();
    });
  }

  /** kill -9: no goodbye, its leases left to expire. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (child === undefined || !this.running()) return;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    });
  }
}

/** An operator's session on one server, over HTTP (operator.* operations). */
export interface HttpOperator {
  get(path: string): Promise<{ status: number; body: string; json(): unknown }>;
  post(path: string, body?: object): Promise<{ status: number; body: string; json(): unknown }>;
}

export interface ScaleOutCluster {
  readonly databaseUrl: string;
  /** The database's name (PostgreSQL backends' process titles carry it). */
  readonly databaseName: string;
  /** This process's own connection to the cluster's database, for reading back what happened. */
  readonly storage: Storage;
  readonly s3: S3TestServer;
  readonly servers: readonly ClusterServer[];
  readonly hosts: readonly ClusterHost[];
  /** The deployment's master key (hex), as every server has it. */
  readonly masterKey: string;
  /** A new tenant with an owner; its CLI token. */
  tenant(): Promise<{ tenant: string; token: string }>;
  /** Onboards `repository` for `tenant`. */
  onboard(tenant: string, repository: string): Promise<void>;
  /** The tenant API of server `index` with `token`. */
  api(index: number, token: string): Api;
  /** An operator session on server `index` (opened with the bootstrap credential). */
  operator(index: number): Promise<HttpOperator>;
  /** Stops every host (SIGTERM) and server, s3rver, and drops the database. */
  close(): Promise<void>;
}

/** Starts the cluster (see the file's comment). PostgreSQL from KILN_TEST_POSTGRES_URL. */
export async function startScaleOutCluster(options: ScaleOutClusterOptions): Promise<ScaleOutCluster> {
  const database = await createPostgresTestDatabase();
  const databaseName = new URL(database.url).pathname.slice(1);
  const scratch: string[] = [];
  const dir = (what: string) => {
    const made = mkdtempSync(join(tmpdir(), `kiln-scale-out-${what}-`));
    scratch.push(made);
    return made;
  };
  let s3: S3TestServer | undefined;
  let storage: Storage | undefined;
  const servers: ClusterServer[] = [];
  const hosts: ClusterHost[] = [];
  const close = async () => {
    await Promise.all(hosts.map((h) => h.stop()));
    await Promise.all(servers.map((s) => s.stop()));
    await storage?.close();
    await s3?.stop();
    await database.drop();
    for (const made of scratch) rmSync(made, { recursive: true, force: true });
  };
  try {
    s3 = await startS3TestServer("kiln-scale-out");
    const masterKey = randomBytes(32).toString("hex");
    const blobUrl = `s3://${s3.bucket}/blobs?endpoint=${encodeURIComponent(s3.endpoint)}&region=us-east-1&force_path_style=true`;
    for (let i = 0; i < options.servers; i++) {
      const name = String.fromCharCode(65 + i);
      const port = await freePort();
      const hostPort = await freePort();
      servers.push(
        new ClusterServer(name, port, hostPort, {
          KILN_DATABASE_URL: database.url,
          KILN_DATA_DIR: dir(`server-${name}`),
          KILN_MASTER_KEY: masterKey,
          KILN_LOCAL_HOST: "off",
          KILN_LISTEN: `127.0.0.1:${port}`,
          KILN_PUBLIC_URL: `http://127.0.0.1:${port}`,
          KILN_HOST_LISTEN: `127.0.0.1:${hostPort}`,
          KILN_HOST_TLS_NAMES: "127.0.0.1",
          KILN_BLOB_URL: blobUrl,
          // s3rver's fixed key pair, through the AWS SDK's own chain (never in KILN_BLOB_URL).
          AWS_ACCESS_KEY_ID: "S3RVER",
          AWS_SECRET_ACCESS_KEY: "S3RVER",
          KILN_DOGFOOD_AUDIT_INTERVAL_SECONDS: "0",
          ...options.serverEnv,
        }),
      );
    }
    // The first server makes the schema and the CA; the others find both.
    const [first, ...others] = servers;
    assert.ok(first !== undefined, "a cluster has a server");
    await first.start();
    await Promise.all(others.map((s) => s.start()));
    const caSha256 = first.caSha256();
    for (const server of others) assert.equal(server.caSha256(), caSha256, "one CA for the deployment");
    storage = await openStorage({ databaseUrl: database.url, dataDir: "/nonexistent-kiln-data-dir" });
    const opened = storage;

    for (let i = 0; i < options.hosts; i++) {
      const id = `${options.hostIdPrefix ?? "builder"}-${i + 1}`;
      const server = servers[(options.serverOfHost ?? ((n) => n % servers.length))(i)];
      assert.ok(server !== undefined, `host ${id} names no server`);
      const { token } = await mintHostEnrollmentToken(opened, { hostId: id, createdBy: "scale-out", now: new Date() });
      const dataDir = dir(`host-${i + 1}`);
      hosts.push(
        new ClusterHost(id, server, dataDir, {
          ...process.env,
          KILN_ENDPOINT: server.hostOrigin,
          // Redeemed once; its certificate stays in the data dir across kills and restarts.
          KILN_HOST_ENROLLMENT_TOKEN: token,
          KILN_HOST_CA_SHA256: caSha256,
          KILN_HOST_DATA_DIR: dataDir,
          KILN_HOST_VCPUS: String(options.hostVcpus ?? 2),
        }),
      );
    }
    if (options.startHosts !== false) await Promise.all(hosts.map((h) => h.start()));

    return {
      databaseUrl: database.url,
      databaseName,
      storage: opened,
      s3,
      servers,
      hosts,
      masterKey,
      tenant: async () => {
        const owner = await personWithToken(opened, { role: "owner", now: new Date() });
        return { tenant: owner.tenant, token: owner.token };
      },
      onboard: async (tenant, repository) => {
        await onboardRepository(opened, { tenantId: tenant, name: repository, onboardedBy: "scale-out" }, new Date());
      },
      api: (index, token) => {
        const server = servers[index];
        assert.ok(server !== undefined, `no server ${index}`);
        return fetchApi(server.url, token);
      },
      operator: async (index) => {
        const server = servers[index];
        assert.ok(server !== undefined, `no server ${index}`);
        const credential = await operatorCredential(opened, Buffer.from(masterKey, "hex"), false, new Date());
        const session = await fetch(`${server.url}/operator/auth/session`, {
          method: "POST",
          headers: { authorization: `Bearer ${credential}` },
        });
        assert.equal(session.status, 204, await session.text());
        const cookie = /kiln_operator_session=[^;]+/.exec(session.headers.get("set-cookie") ?? "")?.[0];
        assert.ok(cookie !== undefined, "the operator session's cookie");
        const headers = { cookie, "sec-fetch-site": "same-origin" };
        const call = async (method: "GET" | "POST", path: string, body?: object) => {
          const res = await fetch(`${server.url}${path}`, {
            method,
            headers: body === undefined ? headers : { ...headers, "content-type": "application/json" },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          });
          const text = await res.text();
          return { status: res.status, body: text, json: () => JSON.parse(text) as unknown };
        };
        return { get: (path) => call("GET", path), post: (path, body) => call("POST", path, body) };
      },
      close,
    };
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
}
