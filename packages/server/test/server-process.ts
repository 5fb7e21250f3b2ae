import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../src/main.js", import.meta.url));

/** A real `kiln-server serve` process. */
export interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** What the process wrote on stdout and stderr, for failure messages. */
  output(): string;
  /** The data directory made for it (startSharedDatabaseServer), for its caller to remove. */
  dataDir?: string;
}

/**
 * Starts `kiln-server serve` on an ephemeral port with `env` over the test's own
 * environment (a value of undefined removes the variable) and resolves once it prints
 * where it serves.
 */
export async function startServerProcess(env: Record<string, string | undefined>): Promise<ServerProcess> {
  const merged: NodeJS.ProcessEnv = {
    ...process.env,
    KILN_LISTEN: "127.0.0.1:0",
    KILN_LOG_LEVEL: "warn",
    // The platform's own canary jobs and anomaly rules stay off unless a test turns them on.
    KILN_CANARY_INTERVAL_SECONDS: "0",
    KILN_ANOMALY_INTERVAL_SECONDS: "0",
    // The tests place several attempts at once on a two-core machine (each cgroup still caps its own).
    KILN_LOCAL_HOST_VCPUS: "16",
  };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete merged[name];
    else merged[name] = value;
  }
  const child = spawn(process.execPath, [MAIN, "serve"], { env: merged, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout?.setEncoding("utf8");
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    out += chunk;
  });
  const url = await new Promise<string>((resolve, reject) => {
    // A bound on a server that hangs, not a measure of its start (a second or two when idle).
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 180_000);
    child.stdout?.on("data", (chunk: string) => {
      out += chunk;
      const m = /serving (http:\/\/\S+)/.exec(out);
      if (m?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
  return { url, child, output: () => out };
}

/** A control-plane-only server on a shared PostgreSQL database (no local host, its own data dir). */
export async function startSharedDatabaseServer(databaseUrl: string): Promise<ServerProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), "kiln-proc-"));
  const server = await startServerProcess({
    KILN_DATABASE_URL: databaseUrl,
    KILN_LOCAL_HOST: "off",
    KILN_DATA_DIR: dataDir,
  });
  return { ...server, dataDir };
}

export async function stopServerProcess(
  server: ServerProcess | undefined,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<void> {
  if (server === undefined || server.child.exitCode !== null || server.child.signalCode !== null) return;
  const exited = once(server.child, "exit");
  server.child.kill(signal);
  await exited;
}

/** A process's resident memory (VmRSS, bytes). */
export function residentBytesOf(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN) * 1024;
}

/**
 * A process's resident memory sampled every `everyMs` from construction until `stop()`, which
 * answers what it was at the start and its peak meanwhile.
 */
export class ResidentMemorySampler {
  readonly before: number;
  #peak: number;
  #sampling = true;
  readonly #loop: Promise<void>;

  constructor(
    private readonly pid: number,
    private readonly everyMs = 50,
  ) {
    this.before = residentBytesOf(pid);
    this.#peak = this.before;
    this.#loop = this.#sample();
  }

  async #sample(): Promise<void> {
    while (this.#sampling) {
      this.#peak = Math.max(this.#peak, residentBytesOf(this.pid));
      await new Promise((resolve) => setTimeout(resolve, this.everyMs));
    }
  }

  async stop(): Promise<{ readonly before: number; readonly peak: number }> {
    this.#sampling = false;
    await this.#loop;
    return { before: this.before, peak: this.#peak };
  }
}
