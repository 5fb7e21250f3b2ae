import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { type ClientRequest, get, type IncomingMessage } from "node:http";
import { type AttemptReport, type JobAdmission, operationById, type SourceEntry } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import {
  appendLogRecords,
  type BlobStore,
  claimNextJob,
  finishAttempt,
  insertJob,
  type JobRow,
  type LocalBlobStore,
  newJobId,
  registerHost,
  type Storage,
} from "@kiln/storage";
import { attemptCompletion, queuedJob } from "@kiln/storage/testing";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../build-app.js";
import { VCPUS_OF_SIZE } from "../domain/policy/platform-limits.js";
import { defaultHandlers } from "../web/handlers/default-handlers.js";
import { type BoundHandler, boundHandlerOf, type HandlerTable } from "../web/http/handler.js";
import type { SourceFile } from "./crates.js";
import { bearer, hostProtocolOf, type TestApp, testBlobs } from "./harness.js";

/**
 * Jobs built through the real storage verbs (insertJob, claimNextJob, appendLogRecords,
 * finishAttempt), as the submission handler and a host would, for the read-side tests.
 */

export interface JobsTestApp {
  app: FastifyInstance;
  storage: Storage;
  clock: ManualClock;
  /** The test app's own local store (testBlobs), its files inspectable by a test. */
  blobs: LocalBlobStore;
  /** Event-stream handlers of `operation` still running (a stream ends its handler when it closes). */
  openStreams(operation: string): number;
  close(): Promise<void>;
}

/** The real app on real storage, every JSON response checked against the contract; blobs exposed. */
export async function jobsTestApp(storage: Storage): Promise<JobsTestApp> {
  const clock = ManualClock.withRealTimers();
  const blobs = testBlobs();
  const open = new Map<string, number>();
  const counted = (id: string, handler: BoundHandler): BoundHandler => {
    return async (ctx) => {
      open.set(id, (open.get(id) ?? 0) + 1);
      try {
        return await handler(ctx);
      } finally {
        open.set(id, (open.get(id) ?? 0) - 1);
      }
    };
  };
  const handlers: HandlerTable = Object.fromEntries(
    Object.keys(defaultHandlers).map((id) => {
      const handler = boundHandlerOf(defaultHandlers, id);
      return [
        id,
        handler !== undefined && operationById(id).response.encoding === "sse" ? counted(id, handler) : handler,
      ];
    }),
  );
  const app = buildApp(
    { storage, clock, version: "test", publicOrigin: "http://kiln.test", blobs, checkResponses: true },
    handlers,
  );
  await app.ready();
  return {
    app,
    storage,
    clock,
    blobs,
    openStreams: (operation) => open.get(operation) ?? 0,
    close: async () => {
      await app.close();
      await storage.close();
    },
  };
}

let jobs = 0;

/** The admission a fixture job was accepted with: toolchain 1.85.0 from the invocation, offline, no settings. */
export const FIXTURE_ADMISSION: JobAdmission = {
  toolchain: "1.85.0",
  toolchain_origin: "invocation",
  network_policy: "offline",
  configuration_sha256: null,
  settings_version: 0,
  injections: [],
  wall_clock_ceiling: { seconds: 3600, origin: "platform default" },
  affected_tests: false,
};

/** A queued job of `tenant`, accepted at `now`, as jobs.submit stores one. */
export async function acceptJob(
  storage: Storage,
  input: {
    tenant: string;
    now: Date;
    repository?: string;
    maxAttempts?: number;
    /** The job's exact source (default: none). */
    source?: readonly SourceEntry[];
    /** The stored admission JSON instead of a complete one (e.g. a broken record). */
    admitted?: string;
  },
): Promise<JobRow> {
  jobs += 1;
  const invocation = { operation: "test", arguments: ["--workspace"], artifacts: ["release/app"] };
  const now = input.now.toISOString();
  const { job } = await insertJob(
    storage,
    queuedJob(
      {
        id: newJobId(input.now),
        tenant: input.tenant,
        submissionKey: `fixture-${process.pid}-${jobs}`,
        requestHash: createHash("sha256").update(`fixture-${jobs}`).digest("hex"),
        queuedAt: now,
      },
      {
        repository: input.repository ?? "acme/widget",
        invocation: JSON.stringify(invocation),
        source_manifest: JSON.stringify(input.source ?? []),
        max_attempts: input.maxAttempts ?? 3,
        admitted: input.admitted ?? JSON.stringify(FIXTURE_ADMISSION),
      },
    ),
  );
  return job;
}

export interface AttemptLease {
  readonly jobId: string;
  readonly attempt: number;
  readonly leaseToken: string;
}

export const HOST = "host-fixture";

/**
 * Places `jobId` on the fixture host. Placement takes the oldest queued job first, so
 * jobs other tests left queued are placed (and left running) on the way.
 */
export async function claimJob(storage: Storage, jobId: string, now: Date, leaseSeconds = 60): Promise<AttemptLease> {
  await registerHost(storage, { id: HOST, vcpus: 64, memoryBytes: 128 * 2 ** 30, isolation: "sandbox", now });
  for (;;) {
    const placed = await claimNextJob(storage, {
      hostId: HOST,
      freeVcpus: 64,
      vcpusOfSize: VCPUS_OF_SIZE,
      leaseSeconds,
      now,
    });
    assert.ok(placed, `job ${jobId} was not placed`);
    if (placed.job.id === jobId) {
      return { jobId, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token };
    }
  }
}

/** Appends `texts` as stdout lines of the leased attempt, fenced by its lease. */
export async function appendLines(
  storage: Storage,
  lease: AttemptLease,
  texts: readonly string[],
  now: Date,
): Promise<void> {
  const accepted = await appendLogRecords(storage, {
    ...lease,
    lines: texts.map((text, i) => ({ stream: i % 5 === 4 ? "stderr" : "stdout", at: now, text })),
  });
  assert.equal(accepted, true);
}

/** A report as a host stores it for attempt `lease`. */
export function hostReport(lease: AttemptLease, now: Date): AttemptReport {
  const at = now.toISOString();
  return {
    phases: [
      { name: "provision", status: "passed", started_at: at, finished_at: at, duration_ms: 12 },
      { name: "test", status: "passed", started_at: at, finished_at: at, duration_ms: 840 },
      { name: "publish", status: "passed", started_at: at, finished_at: at, duration_ms: 3 },
    ],
    crates: [
      { name: "serde", version: "1.0.210", source: "registry", outcome: "fresh", duration_ms: null },
      { name: "widget", version: "0.1.0", source: "workspace", outcome: "compiled", duration_ms: 700 },
    ],
    tests: [
      { target: "widget (lib)", name: "tests::adds", outcome: "passed", duration_ms: 2 },
      { target: "widget (lib)", name: "tests::slow", outcome: "ignored", duration_ms: null },
    ],
    caches: [
      {
        lineage: "lin-1",
        class: "test:stable:kiln2-cpu",
        outcome: "cold",
        reason: "first job of the class",
        restored_bytes: 0,
        saved_bytes: 1024,
      },
    ],
    injections: [
      {
        setting: "profile.dev.debug",
        value: "0",
        origin: "platform default",
        status: "applied",
        detail: "smaller debug info",
      },
    ],
    unit: {
      id: `${lease.jobId}-a${lease.attempt}`,
      host: HOST,
      isolation: "sandbox",
      started_at: at,
      finished_at: at,
      vcpus: 2,
      memory_bytes: 4 * 2 ** 30,
      exit_code: 0,
      cpu_seconds: 1.5,
      peak_memory_bytes: null,
      oom_killed: false,
    },
  };
}

/** Finishes the leased attempt as a host reports it: output and artifact bytes go to the blob store first. */
export async function finishJob(
  storage: Storage,
  blobs: BlobStore,
  lease: AttemptLease,
  input: {
    now: Date;
    outcome?: "passed" | "failed" | "cancelled";
    report?: AttemptReport;
    cargoOutput?: Buffer | null;
    artifacts?: readonly { path: string; bytes: Buffer }[];
    retentionSeconds?: number;
  },
): Promise<void> {
  const outcome = input.outcome ?? "passed";
  const cargoOutput = input.cargoOutput === null ? null : await blobs.put(input.cargoOutput ?? Buffer.from("")); // empty output is still retained
  const artifacts = [];
  for (const file of input.artifacts ?? []) artifacts.push({ path: file.path, ...(await blobs.put(file.bytes)) });
  const result = await finishAttempt(storage, {
    ...lease,
    now: input.now,
    result: attemptCompletion(outcome, {
      report: JSON.stringify(input.report ?? hostReport(lease, input.now)),
      cargoOutput,
      artifacts,
      artifactRetentionSeconds: input.retentionSeconds ?? 3600,
    }),
    meter: () => ({ size: "kiln2-cpu", seconds: 30, vcpuSeconds: 60 }),
  });
  assert.equal(result, "finished");
}

/** One parsed server-sent event. */
export interface ReceivedEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: string;
}

/**
 * Reads a server-sent event stream over a real socket, frame by frame. Comment lines
 * (heartbeats) are skipped. close() destroys the connection, as a client going away.
 * (node:http without an agent rather than fetch: undici opens a fresh pooled connection
 * when a request is aborted, which then holds the server's close for its idle timeout.)
 */
export class SseReader {
  private buffer = "";
  private ended = false;
  private readonly chunks: AsyncIterator<Buffer>;
  private readonly decoder = new TextDecoder();
  /** A read still outstanding after a timeout; the next call takes its result. */
  private pending: Promise<IteratorResult<Buffer>> | null = null;

  private constructor(
    private readonly request: ClientRequest,
    readonly response: IncomingMessage,
  ) {
    this.chunks = response[Symbol.asyncIterator]();
  }

  get status(): number {
    return this.response.statusCode ?? 0;
  }

  header(name: string): string | undefined {
    const value = this.response.headers[name.toLowerCase()];
    return Array.isArray(value) ? value.join(", ") : value;
  }

  static open(url: string, headers: Record<string, string>): Promise<SseReader> {
    return new Promise((resolve, reject) => {
      const request = get(url, { headers: { accept: "text/event-stream", ...headers }, agent: false }, (response) =>
        resolve(new SseReader(request, response)),
      );
      request.on("error", reject);
    });
  }

  /**
   * The next event, or null once the server ended the stream. Waits as long as it takes (as
   * `eventually` does: a deadline would make the verdict depend on the machine's load); with
   * `timeoutMs`, fails after it, which only `quiet` asks for.
   */
  async next(timeoutMs = Number.POSITIVE_INFINITY): Promise<ReceivedEvent | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const boundary = this.buffer.indexOf("\n\n");
      if (boundary >= 0) {
        const block = this.buffer.slice(0, boundary);
        this.buffer = this.buffer.slice(boundary + 2);
        const parsed = parseEvent(block);
        if (parsed !== null) return parsed;
        continue;
      }
      if (this.ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no event within ${timeoutMs} ms`);
      let timer: NodeJS.Timeout | undefined;
      this.pending ??= this.chunks.next();
      const chunk = await Promise.race([
        this.pending,
        ...(left === Number.POSITIVE_INFINITY
          ? []
          : [
              new Promise<"timeout">((resolve) => {
                timer = setTimeout(() => resolve("timeout"), left);
              }),
            ]),
      ]);
      clearTimeout(timer);
      if (chunk === "timeout") throw new Error(`no event within ${timeoutMs} ms`);
      this.pending = null;
      if (chunk.done === true) this.ended = true;
      else this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }

  /** Every event until the server ends the stream. */
  async rest(): Promise<ReceivedEvent[]> {
    const events: ReceivedEvent[] = [];
    for (;;) {
      const event = await this.next();
      if (event === null) return events;
      events.push(event);
    }
  }

  /** Asserts nothing arrives for `ms` (no event, and the stream stays open). */
  async quiet(ms: number): Promise<void> {
    await assert.rejects(this.next(ms), /no event within/);
  }

  close(): void {
    this.pending?.catch(() => undefined);
    this.request.destroy();
  }
}

function parseEvent(block: string): ReceivedEvent | null {
  let event = "message";
  let id: string | undefined;
  const data: string[] = [];
  let fields = 0;
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    fields += 1;
    if (name === "event") event = value;
    else if (name === "id") id = value;
    else if (name === "data") data.push(value);
  }
  return fields === 0 ? null : { event, id, data: data.join("\n") };
}

/** Listens on an ephemeral loopback port; returns the base URL. */
export async function listen(app: FastifyInstance): Promise<string> {
  return app.listen({ port: 0, host: "127.0.0.1" });
}

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
const validators = new Map<object, ValidateFunction>();

/** Asserts `value` satisfies the contract schema (SSE frames are not covered by checkResponses). */
export function assertSchema(schema: object, value: unknown): void {
  let validate = validators.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  assert.ok(validate(value), `${ajv.errorsText(validate.errors)}: ${JSON.stringify(value).slice(0, 400)}`);
}

/**
 * Waits until `condition` holds, checking every 20 ms, for as long as it takes. There is no
 * deadline: how long a condition takes to come depends on the machine's load, so a deadline would
 * make the verdict depend on it too (a 3 s one did, on a shared two-core machine). A condition
 * that never comes fails the test by name at the runner's per-test timeout
 * (scripts/run-tests.mjs).
 */
export async function eventually(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** One file of an inline (schema_version 1) source: `text`'s bytes at `path`. */
export const inlineFile = (path: string, text: string, executable = false): SourceFile => ({
  path,
  bytes: [...Buffer.from(text)],
  executable,
});

/** The two-file crate inlineSubmission sends unless a test names its own files. */
export const INLINE_CRATE: readonly SourceFile[] = [
  inlineFile("Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\n'),
  inlineFile("src/lib.rs", "pub fn f() {}\n"),
];

/**
 * A jobs.submit body: `cargo <operation>` (test unless named) of the inline `files` (a two-file
 * crate unless named) in `repository`, on branch main of a fixed commit, at `more.size`
 * (kiln2-cpu unless named); `more.invocation` adds to or replaces the invocation's fields
 * (arguments, toolchain, environment…). The one submission literal of the tests and benches.
 */
export const inlineSubmission = (
  repository: string,
  operation = "test",
  files: readonly SourceFile[] = INLINE_CRATE,
  more: { size?: string; invocation?: Record<string, unknown> } = {},
) => ({
  schema_version: 1,
  repository,
  size: more.size ?? "kiln2-cpu",
  workspace: {
    base_commit: "0123456789abcdef0123456789abcdef01234567",
    branch: "main",
    invocation: { operation, arguments: [] as string[], ...more.invocation },
    source: { files: [...files] },
  },
});

/**
 * Submits `inlineSubmission(repository, operation)` through the API as `token`'s holder under
 * idempotency key `key`, places it through the host protocol on a test host ("local", 16 vCPUs,
 * no cargo) and moves the clock a minute, so the attempt is metered: the protocol and the
 * placement, for the test to finish the attempt with what it needs.
 */
export async function submitAndPlace(
  t: TestApp,
  input: { token: string; repository: string; key: string; operation?: string },
) {
  const protocol = hostProtocolOf(t.deps);
  const res = await t.app.inject({
    method: "POST",
    url: "/api/v4/jobs",
    headers: { ...bearer(input.token), "idempotency-key": input.key },
    payload: inlineSubmission(input.repository, input.operation),
  });
  assert.equal(res.statusCode, 200, res.body);
  await protocol.enroll({ id: "local", vcpus: 16, memoryBytes: 2 ** 34, isolation: "sandbox" });
  const placement = await protocol.claim("local", 16);
  assert.ok(placement !== null);
  await t.clock.advance(60_000);
  return { protocol, placement };
}
