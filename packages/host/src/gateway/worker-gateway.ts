import { type ChildProcess, fork } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { messageOf } from "@kiln/contract";
import { AttemptCgroup } from "../executor/shared/attempt-cgroup.js";
import { type CgroupLayout, detectCgroupLayout, readOwnCgroups } from "../executor/shared/cgroup-layout.js";
import { CrateCache } from "./crate-cache.js";
import type { ProvidedDependencies, ProvideRequest } from "./dependency-gateway.js";
import { GatewayError } from "./gateway-error.js";
import type { FromWorker, ToWorker, WorkerGatewayConfig } from "./gateway-worker-protocol.js";

/** What provides a `dependency-gateway` job's packages: DependencyGateway itself, or the same in a worker. */
export interface DependencyProvider {
  provide(request: ProvideRequest): Promise<ProvidedDependencies>;
}

const WORKER_SCRIPT = fileURLToPath(new URL("./gateway-worker.js", import.meta.url));

/** The worker's own bounds: far above what streaming needs, far below what would hurt the host. */
const WORKER_LIMITS = { vcpus: 1, memoryBytes: 1 * 2 ** 30, pids: 256, diskBytes: 1 };
const WORKER_HEAP_MIB = 384;

/** Most of a worker's stderr kept to say why it died. */
const STDERR_TAIL_BYTES = 4096;

export interface WorkerGatewayOptions {
  readonly config: WorkerGatewayConfig;
  /** Where the worker's cgroups go (the executor's parent, e.g. "kiln"); null runs workers without one. */
  readonly cgroupParentName: string | null;
}

/**
 * The dependency gateway as the host agent runs it: each attempt's fetch phase in a child
 * process of its own (gateway-worker.ts), in a cgroup of its own where the host has cgroups
 * (1 vCPU, 1 GiB, 256 processes) and its own process group.
 *
 * Why a process (issue 33): the agent is the server process when the host is embedded, one
 * event loop every tenant's requests share. Whatever a workspace makes the gateway do —
 * download, hash, parse index files and manifests, run git — now costs the worker's memory and
 * CPU, not the server's; a worker that misbehaves is killed whole (its process group: git,
 * flock, ssh with it) at the job's wall-clock ceiling or the moment the job is cancelled, so
 * nothing is left to retry. The agent keeps what only it has: the tenant's credentials (handed
 * over only when a private registry is used), the sandbox that generates a lockfile, the job's
 * log, and the crate cache's accounting and eviction (workers store into the shared cache).
 * A worker serves one attempt and ends; the next one is started as an attempt finishes and waits
 * idle, since starting Node and loading the gateway is most of what a warm fetch costs
 * (docs/benchmarks.md).
 */
export class WorkerGateway implements DependencyProvider {
  /** The crate cache's accounting: workers report what they store, this instance evicts past the bound. */
  readonly cache: CrateCache;
  /** A worker started ahead of the next attempt (idle, in no cgroup): Node's start-up is most of a warm fetch's time. */
  #spare: ChildProcess | null = null;
  #closed = false;
  #cgroupSetup: Promise<{ layout: CgroupLayout; ownCgroups: ReadonlyMap<string, string> } | null> | null = null;

  constructor(private readonly options: WorkerGatewayOptions) {
    this.cache = new CrateCache(options.config.cacheRoot, options.config.cacheMaxBytes);
  }

  async provide(request: ProvideRequest): Promise<ProvidedDependencies> {
    request.signal.throwIfAborted();
    const child = this.#take();
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const cgroup = await this.#cgroupFor(child, request);
    try {
      return await this.#converse(child, request);
    } finally {
      // Answered only once the worker is gone: a cancelled fetch has ended when provide() says so.
      killGroup(child);
      await exited;
      if (cgroup !== null) {
        await cgroup.killAll().catch(() => false);
        await cgroup.remove().catch(() => undefined);
      }
      // The next attempt's worker starts now (once this answer is on its way), so that attempt
      // does not wait for Node to start.
      setImmediate(() => this.prepare());
    }
  }

  /** Starts the next attempt's worker now (the host starting), rather than as the first attempt ends. */
  prepare(): void {
    if (!this.#closed) this.#spare ??= this.#fork();
  }

  /** Ends the worker kept for the next attempt (the host is stopping). */
  close(): void {
    this.#closed = true;
    const spare = this.#spare;
    this.#spare = null;
    if (spare !== null) killGroup(spare);
  }

  /**
   * A worker process, started idle: it waits for its attempt's request. Its own process group
   * (detached) so that it and everything it starts end together, and nothing of the agent's
   * environment (database URLs, keys): it needs a PATH and a temporary directory. Idle, it never
   * keeps the agent's process alive; it ends itself when the agent goes.
   */
  #fork(): ChildProcess {
    const child = fork(WORKER_SCRIPT, ["idle"], {
      detached: true,
      execArgv: [`--max-old-space-size=${WORKER_HEAP_MIB}`],
      env: { PATH: "/usr/bin:/bin", TMPDIR: process.env.TMPDIR ?? "/tmp" },
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      serialization: "json",
    });
    child.unref();
    child.channel?.unref();
    child.once("exit", () => {
      if (this.#spare === child) this.#spare = null;
    });
    return child;
  }

  /** The idle worker started ahead, if it is still there, else a new one; held for one attempt. */
  #take(): ChildProcess {
    const spare = this.#spare;
    this.#spare = null;
    const child = spare?.connected && spare.exitCode === null ? spare : this.#fork();
    child.ref();
    child.channel?.ref();
    return child;
  }

  /** Moves the worker into a cgroup of its own, where the host has cgroups; says so in the job's log where not. */
  async #cgroupFor(child: ChildProcess, request: ProvideRequest): Promise<AttemptCgroup | null> {
    const parentName = this.options.cgroupParentName;
    if (parentName === null || child.pid === undefined) return null;
    this.#cgroupSetup ??= (async () => ({
      layout: await detectCgroupLayout(),
      ownCgroups: await readOwnCgroups(),
    }))().catch(() => null);
    const setup = await this.#cgroupSetup;
    if (setup === null) return null;
    try {
      const cgroup = await AttemptCgroup.create({
        ...setup,
        parentName,
        attemptId: `${request.attemptId}-fetch`,
        limits: WORKER_LIMITS,
      });
      for (const file of cgroup.procsFiles) await writeFile(file, String(child.pid));
      return cgroup;
    } catch (error) {
      request.log(`the fetch worker runs without a cgroup of its own (${messageOf(error)})`);
      return null;
    }
  }

  #converse(child: ChildProcess, request: ProvideRequest): Promise<ProvidedDependencies> {
    return new Promise<ProvidedDependencies>((resolve, reject) => {
      let settled = false;
      let stderr = "";
      const finish = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        request.signal.removeEventListener("abort", onAbort);
        outcome();
      };
      const fail = (error: unknown) => finish(() => reject(error));
      const onAbort = () => {
        // Cancellation or the ceiling: the fetch ends now, whatever it was doing; nothing retries.
        killGroup(child);
        fail(request.signal.reason ?? new Error("aborted"));
      };
      request.signal.addEventListener("abort", onAbort, { once: true });
      const send = (message: ToWorker) => {
        if (child.connected) child.send(message);
      };
      child.stderr?.on("data", (chunk: Buffer) => {
        stderr = `${stderr}${chunk.toString("utf8")}`.slice(-STDERR_TAIL_BYTES);
      });
      child.on("error", fail);
      // `close`, not `exit`: a worker's last message may still be on its way when it has exited;
      // `close` comes once its IPC channel and stderr are drained.
      child.on("close", (code, signal) =>
        fail(
          new Error(
            `the dependency gateway's worker ended without an answer (${signal ?? `exit ${code}`})${stderr.trim() === "" ? "" : `: ${stderr.trim()}`}`,
          ),
        ),
      );
      child.on("message", (raw) => {
        const message = raw as FromWorker;
        switch (message.type) {
          case "log":
            request.log(message.line);
            return;
          case "stored":
            this.cache.added(message.bytes).catch((error: unknown) => {
              request.log(`the crate cache could not be trimmed to its bound: ${messageOf(error)}`);
            });
            return;
          case "credentials":
            request.credentials().then((grants) => send({ type: "credentials", grants }), fail);
            return;
          case "generate-lockfile":
            request.generateLockfile(message.config, message.environment).then(
              (text) => send({ type: "lockfile", id: message.id, text }),
              // The sandbox's failure is the attempt's answer as it stands (the job's, or the host's).
              fail,
            );
            return;
          case "done":
            finish(() => resolve(message.result));
            return;
          case "failed":
            fail(message.kind === null ? new Error(message.message) : new GatewayError(message.kind, message.message));
            return;
        }
      });
      const { signal: _signal, credentials: _c, generateLockfile: _g, log: _l, ...plain } = request;
      send({ type: "provide", config: this.options.config, request: plain });
    });
  }
}

/** SIGKILLs the worker's process group: the worker, and any git, flock or ssh it started (alive or not). */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // No such group any more: everything in it has ended.
  }
}
