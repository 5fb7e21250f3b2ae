import { Worker } from "node:worker_threads";
import type { TomlDocument } from "../../domain/jobs/toml-document.js";
import type { BodyAnswer, WorkerAnswer, WorkerTask } from "./body-worker.js";

/** A task as it waits: what to do with its bytes (a body of an operation, or a TOML file). */
type TaskKind = { readonly kind: "body"; readonly operation: string } | { readonly kind: "toml" };

interface Waiting {
  readonly task: TaskKind;
  readonly bytes: Uint8Array;
  readonly resolve: (answer: WorkerAnswer) => void;
  readonly reject: (error: Error) => void;
}

interface Running extends Waiting {
  readonly id: number;
}

/**
 * A few worker threads reading large JSON bodies and parsing the TOML files admission reads
 * (body-worker.ts), shared by every tenant of the process. Tasks wait in one queue per tenant and
 * the workers take them tenant by tenant in turn, so a tenant sending large bodies back to back
 * delays another tenant's large body by at most one of its own per worker, not by its whole
 * backlog (and the per-tenant bound of large-request-admission.ts keeps that backlog short).
 *
 * Workers start on the first large body, not with the app, and do not keep the process alive.
 * A worker that fails (an exception outside a body's reading, or its exit) fails the body it
 * held — the request is answered `unavailable` and logged by the error boundary — and is
 * replaced by the next body's.
 */
export class BodyWorkerPool {
  readonly #size: number;
  readonly #idle: Worker[] = [];
  readonly #running = new Map<Worker, Running>();
  /** Tenant → its waiting bodies; Map order is the turn order (a served tenant goes to the back). */
  readonly #queues = new Map<string, Waiting[]>();
  #starting = 0;
  #nextId = 1;
  #closed = false;
  /** Bodies read by a worker so far (answered, whatever the verdict). */
  bodiesRead = 0;
  /** TOML files parsed by a worker so far (answered, parsed or not). */
  tomlFilesParsed = 0;

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1)
      throw new Error(`a body worker pool needs at least one worker, got ${size}`);
    this.#size = size;
  }

  /** Reads `bytes` as operation `operation`'s JSON body on a worker, in `tenant`'s turn. */
  async read(tenant: string, operation: string, bytes: Buffer): Promise<BodyAnswer> {
    return (await this.#enqueue(tenant, { kind: "body", operation }, bytes)) as BodyAnswer;
  }

  /**
   * Parses `bytes` as a TOML file on a worker, in `tenant`'s turn (jobs/admission-source.ts).
   * The bytes are handed over: the caller must not use them again.
   */
  async parseToml(tenant: string, bytes: Buffer): Promise<TomlDocument> {
    const answer = await this.#enqueue(tenant, { kind: "toml" }, bytes);
    if (answer.kind === "toml") return answer.document;
    if (answer.kind === "failed") throw new Error(`a body worker failed parsing a TOML file: ${answer.message}`);
    throw new Error(`a body worker answered a TOML file with ${answer.kind}`);
  }

  #enqueue(tenant: string, task: TaskKind, bytes: Buffer): Promise<WorkerAnswer> {
    if (this.#closed) return Promise.reject(new Error("the body worker pool is closed"));
    // Bytes that own their whole memory are handed over; bytes that share it (a slice of a
    // larger buffer) are copied, so nothing else is detached.
    const owned =
      bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
        ? new Uint8Array(bytes.buffer, 0, bytes.byteLength)
        : Uint8Array.prototype.slice.call(bytes);
    return new Promise<WorkerAnswer>((resolve, reject) => {
      const queue = this.#queues.get(tenant);
      const waiting = { task, bytes: owned, resolve, reject };
      if (queue === undefined) this.#queues.set(tenant, [waiting]);
      else queue.push(waiting);
      this.#dispatch();
    });
  }

  /** Ends every worker; bodies waiting or being read fail. */
  async close(): Promise<void> {
    this.#closed = true;
    const closed = new Error("the body worker pool closed");
    for (const queue of this.#queues.values()) for (const waiting of queue) waiting.reject(closed);
    this.#queues.clear();
    const workers = [...this.#idle, ...this.#running.keys()];
    for (const running of this.#running.values()) running.reject(closed);
    this.#running.clear();
    this.#idle.length = 0;
    await Promise.all(workers.map((worker) => worker.terminate()));
  }

  /** The next tenant's next body, taking tenants in turn. */
  #takeNext(): Waiting | undefined {
    for (const [tenant, queue] of this.#queues) {
      const waiting = queue.shift();
      this.#queues.delete(tenant);
      if (queue.length > 0) this.#queues.set(tenant, queue);
      if (waiting !== undefined) return waiting;
    }
    return undefined;
  }

  #dispatch(): void {
    while (this.#queues.size > 0) {
      const worker = this.#idle.pop();
      if (worker === undefined) {
        if (this.#running.size + this.#idle.length + this.#starting < this.#size) this.#start();
        return;
      }
      const waiting = this.#takeNext();
      if (waiting === undefined) {
        this.#idle.push(worker);
        return;
      }
      const running = { ...waiting, id: this.#nextId++ };
      this.#running.set(worker, running);
      worker.ref();
      const task: WorkerTask = { id: running.id, ...running.task, bytes: running.bytes };
      worker.postMessage(task, [running.bytes.buffer as ArrayBuffer]);
    }
  }

  #start(): void {
    this.#starting += 1;
    const worker = new Worker(new URL("./body-worker.js", import.meta.url));
    worker.unref();
    let started = false;
    let online = false;
    const ready = () => {
      if (started) return;
      started = true;
      this.#starting -= 1;
    };
    worker.once("online", () => {
      online = true;
      ready();
      if (this.#closed) return;
      this.#idle.push(worker);
      this.#dispatch();
    });
    worker.on("message", (answer: WorkerAnswer) => {
      const running = this.#running.get(worker);
      this.#running.delete(worker);
      worker.unref();
      if (running?.task.kind === "body") this.bodiesRead += 1;
      else this.tomlFilesParsed += 1;
      if (running !== undefined && running.id === answer.id) running.resolve(answer);
      if (this.#closed) return;
      this.#idle.push(worker);
      this.#dispatch();
    });
    const fail = (error: Error) => {
      ready();
      const running = this.#running.get(worker);
      this.#running.delete(worker);
      const at = this.#idle.indexOf(worker);
      if (at >= 0) this.#idle.splice(at, 1);
      running?.reject(error);
      if (this.#closed) return;
      if (online) this.#dispatch();
      else {
        // A worker that cannot even start would fail its replacement too: the bodies waiting
        // fail now (answered unavailable), and the next large body tries a worker again.
        for (const queue of this.#queues.values()) for (const waiting of queue) waiting.reject(error);
        this.#queues.clear();
      }
    };
    worker.on("error", fail);
    // An answer this thread cannot read (a value too deep to copy): the task fails, and the
    // worker is replaced, since it already counts the task as answered.
    worker.on("messageerror", (error) => {
      fail(error);
      void worker.terminate();
    });
    worker.on("exit", (code) => {
      if (!this.#closed) fail(new Error(`a body worker exited (code ${code})`));
    });
  }
}
