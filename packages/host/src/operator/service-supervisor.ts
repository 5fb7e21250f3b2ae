import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";

/** The service a local recovery restarts: the host's kiln-host process. */
export interface ServiceSupervisor {
  readonly serviceName: string;
  running(): boolean;
  /** Starts it (stopping it first when running) and resolves once it says it is ready. */
  restart(): Promise<void>;
  /** The newest lines it wrote (its boot's journal), oldest first. */
  journal(): string[];
}

/**
 * Supervises the kiln-host as a child process: started with `command` and `env`, its output
 * kept as its journal (the last `journalLines` lines), ready once a line matches `ready` — the
 * kiln-host writes one after its first health report reached the control plane, so "restarted"
 * means the control plane has heard from it again, not merely that a process exists. It is not
 * restarted by itself: bringing it back is a recovery's step.
 */
export class ProcessSupervisor implements ServiceSupervisor {
  #child: ChildProcess | null = null;
  #lines: string[] = [];

  constructor(
    private readonly options: {
      serviceName: string;
      command: string;
      args: readonly string[];
      env: NodeJS.ProcessEnv;
      ready: RegExp;
      journalLines?: number;
      /** How long a start may take to say it is ready (default 120 s). */
      readyTimeoutMs?: number;
    },
  ) {}

  get serviceName(): string {
    return this.options.serviceName;
  }

  running(): boolean {
    return this.#child !== null && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** The child's pid while it runs (a test stops it to impair the host). */
  pid(): number | undefined {
    return this.running() ? this.#child?.pid : undefined;
  }

  journal(): string[] {
    return [...this.#lines];
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.#start();
  }

  /** Stops the child (SIGTERM, then SIGKILL after `graceMs`) and waits for it to exit. */
  async stop(graceMs = 10_000): Promise<void> {
    const child = this.#child;
    if (child === null || !this.running()) return;
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  }

  #record(chunk: Buffer, onLine: (line: string) => void): void {
    for (const line of chunk.toString("utf8").split("\n")) {
      if (line === "") continue;
      this.#lines.push(line);
      onLine(line);
    }
    const keep = this.options.journalLines ?? 500;
    if (this.#lines.length > keep) this.#lines.splice(0, this.#lines.length - keep);
  }

  async #start(): Promise<void> {
    const child = spawn(this.options.command, [...this.options.args], {
      env: this.options.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#child = child;
    // Its end belongs in its journal: how the boot ended is what a later read_journal looks for.
    child.once("exit", (code, signal) => {
      this.#lines.push(`[${this.serviceName} exited: ${signal ?? `code ${code}`}]`);
    });
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error === undefined) resolve();
        else reject(error);
      };
      const onLine = (line: string) => {
        if (this.options.ready.test(line)) settle();
      };
      child.stdout?.on("data", (chunk: Buffer) => this.#record(chunk, onLine));
      child.stderr?.on("data", (chunk: Buffer) => this.#record(chunk, onLine));
      child.once("error", (error) => settle(error));
      child.once("exit", (code, signal) =>
        settle(new Error(`${this.serviceName} exited (${signal ?? `code ${code}`}) before it was ready`)),
      );
      const timer = setTimeout(
        () => settle(new Error(`${this.serviceName} did not say it was ready`)),
        this.options.readyTimeoutMs ?? 120_000,
      );
    });
  }
}
