import { createHash } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type InputOf, type KilnClient, KilnRefusal } from "@kiln/client";
import {
  CARGO_OPERATIONS,
  jobPagePath,
  PLATFORM_DEFAULT_SIZE,
  renderJunitXml,
  SIZES,
  TERMINAL_JOB_STATUSES,
} from "@kiln/contract";
import type { Command } from "commander";
import { captureWorkspaceConcurrently } from "../archive/capture.js";
import type { Archive } from "../archive/layout.js";
import { layoutCacheDirectory, layoutCachePath, writeClaimedGeneration } from "../archive/layout-cache.js";
import type { UploadSummary } from "../archive/upload.js";
import { uploadWorkspace } from "../archive/upload-workspace.js";
import { findWorkspaceRoot, gitFactsConcurrently, uncommittedPaths, workingDirectory } from "../archive/workspace.js";
import { ConfigError } from "../config.js";
import {
  type DownloadedArtifact,
  describeCounts,
  describeFailures,
  describeFlaky,
  downloadArtifacts,
  exitCodeOf,
  followLogs,
  type Job,
  type JobEvidence,
  lastAttemptFailures,
  printRecord,
  testSummary,
} from "../job-output.js";
import { CliExit, connect, EXIT, err, printJsonLine, runCommand } from "../output.js";
import { STOP_EXIT_CODES, type StopSignal, watchStopSignals } from "../stop-signals.js";

/** A captured workspace submission (jobs.submit's CargoWorkspaceRequest). */
type CargoWorkspaceRequest = InputOf<"jobs.submit">["body"];
type CargoInvocation = CargoWorkspaceRequest["workspace"]["invocation"];
type CargoOperation = CargoInvocation["operation"];
type Size = CargoWorkspaceRequest["size"];

const isCargoOperation = (value: string): value is CargoOperation =>
  (CARGO_OPERATIONS as readonly string[]).includes(value);
const isSize = (value: string): value is Size => (SIZES as readonly string[]).includes(value);

export interface CargoArguments {
  operation: CargoOperation;
  cargoArguments: string[];
  toolchain: string | undefined;
  size: Size | undefined;
  repository: string | undefined;
  artifacts: string[];
  json: boolean;
  concurrency: number | undefined;
  /** Show the service's own log lines (placement, sandbox, cache) beside cargo's. */
  serviceLog: boolean;
  /** Report a `kiln` check run for the workspace's HEAD commit (check.head_sha). */
  check: boolean;
  /** Write the job's test results as JUnit XML here (renderJunitXml of its evidence, as the host's junit.xml artifact). */
  junit: string | undefined;
}

const KILN_VALUE_OPTIONS = new Set(["--size", "--toolchain", "--repository", "--artifact", "--concurrency", "--junit"]);

/**
 * `[+toolchain] <operation> [cargo args…]` with kiln's own options (--size, --toolchain,
 * --repository, --artifact, --concurrency, --junit, --service-log, --check, --json) taken from anywhere before a `--`; every other
 * argument goes to cargo verbatim and in order.
 */
export function parseCargoArguments(argv: readonly string[]): CargoArguments {
  const parsed: Omit<CargoArguments, "operation" | "size"> & { operation: string; size: string | undefined } = {
    operation: "",
    cargoArguments: [],
    toolchain: undefined,
    size: undefined,
    repository: undefined,
    artifacts: [],
    json: false,
    concurrency: undefined,
    serviceLog: false,
    check: false,
    junit: undefined,
  };
  let i = 0;
  if (argv[0]?.startsWith("+")) {
    parsed.toolchain = argv[0].slice(1);
    i = 1;
  }
  let passthrough = false;
  for (; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (passthrough) {
      parsed.cargoArguments.push(arg);
      continue;
    }
    if (arg === "--") {
      passthrough = true;
      parsed.cargoArguments.push(arg);
      continue;
    }
    if (arg === "--json") {
      parsed.json = true;
      continue;
    }
    if (arg === "--service-log") {
      parsed.serviceLog = true;
      continue;
    }
    if (arg === "--check") {
      parsed.check = true;
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq === -1 ? arg : arg.slice(0, eq);
    if (KILN_VALUE_OPTIONS.has(name)) {
      let value: string | undefined;
      if (eq !== -1) value = arg.slice(eq + 1);
      else value = argv[++i];
      if (value === undefined) throw new ConfigError(`${name} needs a value`);
      if (name === "--size") parsed.size = value;
      else if (name === "--toolchain") parsed.toolchain = value;
      else if (name === "--repository") parsed.repository = value;
      else if (name === "--artifact") parsed.artifacts.push(value);
      else if (name === "--junit") parsed.junit = value;
      else parsed.concurrency = Number(value);
      continue;
    }
    if (parsed.operation === "" && !arg.startsWith("-")) parsed.operation = arg;
    else parsed.cargoArguments.push(arg);
  }
  const { operation, size } = parsed;
  if (operation === "") throw new ConfigError("name a cargo operation, e.g. kiln cargo test");
  if (!isCargoOperation(operation)) {
    throw new ConfigError(`kiln runs cargo ${CARGO_OPERATIONS.join(", ")}; not ${operation}`);
  }
  if (size !== undefined && !isSize(size)) {
    throw new ConfigError(`--size must be one of ${SIZES.join(", ")}`);
  }
  if (parsed.concurrency !== undefined && !(Number.isInteger(parsed.concurrency) && parsed.concurrency > 0)) {
    throw new ConfigError("--concurrency must be a positive integer");
  }
  return { ...parsed, operation, size };
}

/**
 * Cargo's arguments with `--color=always` first when the person reads cargo's output in a
 * terminal, as cargo itself decides: an explicit `--color` among the arguments wins, then
 * CARGO_TERM_COLOR (always, never; auto or unset: look at the terminal), then NO_COLOR (any
 * value: none), then whether stderr (where cargo writes) is a TTY. The remote cargo's output
 * is a pipe, so without the flag it is never coloured; the flag goes into the job's command.
 */
export function withTerminalColour(
  cargoArguments: readonly string[],
  terminal: { readonly isTTY: boolean; readonly env: NodeJS.ProcessEnv; readonly json: boolean },
): string[] {
  const end = cargoArguments.indexOf("--");
  const own = end === -1 ? cargoArguments : cargoArguments.slice(0, end);
  if (terminal.json || own.some((a) => a === "--color" || a.startsWith("--color="))) return [...cargoArguments];
  const setting = terminal.env.CARGO_TERM_COLOR?.trim().toLowerCase();
  const colour =
    setting === "always" || (setting !== "never" && (terminal.env.NO_COLOR ?? "") === "" && terminal.isTTY);
  return colour ? ["--color=always", ...cargoArguments] : [...cargoArguments];
}

const MB = 1024 * 1024;

/** A progress bar on a TTY stderr: bytes sent of the bytes to send, and the rate. */
function progressBar(): { update(sent: number, total: number): void; done(): void } {
  const started = Date.now();
  let last = 0;
  let drawn = false;
  return {
    update(sent, total) {
      const now = Date.now();
      if (now - last < 100 && sent < total) return;
      last = now;
      const width = 30;
      const filled = total === 0 ? width : Math.round((sent / total) * width);
      const rate = sent / MB / Math.max(0.001, (now - started) / 1000);
      process.stderr.write(
        `\r[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(sent / MB).toFixed(1)}/${(total / MB).toFixed(1)} MiB  ${rate.toFixed(1)} MiB/s `,
      );
      drawn = true;
    },
    done() {
      if (drawn) process.stderr.write("\n");
    },
  };
}

/**
 * The finished job and its evidence. Once the log has settled the job is terminal, so both are
 * read at once; the evidence is read again only in the unexpected case that it was not yet.
 */
async function settledWithEvidence(client: KilnClient, id: string): Promise<{ job: Job; evidence: JobEvidence }> {
  const [first, evidence] = await Promise.all([
    client.call("jobs.get", { params: { id } }),
    client.call("jobs.evidence", { params: { id } }),
  ]);
  if (TERMINAL_JOB_STATUSES.has(first.status)) return { job: first, evidence };
  for (let delay = 100; ; delay = Math.min(1000, delay * 2)) {
    await sleep(delay);
    const job = await client.call("jobs.get", { params: { id } });
    if (TERMINAL_JOB_STATUSES.has(job.status))
      return { job, evidence: await client.call("jobs.evidence", { params: { id } }) };
  }
}

async function runCargo(argv: readonly string[]): Promise<void> {
  const args = parseCargoArguments(argv);
  const emit = args.json ? printJsonLine : () => {};
  const say = args.json ? () => {} : (line: string) => err(`[kiln] ${line}`);
  const root = findWorkspaceRoot(process.cwd());
  if (root === undefined) throw new ConfigError("no Cargo.toml in this directory or above");
  const { environment, client } = connect();
  const pageOf = (id: string) => `${environment.endpoint}${jobPagePath(id)}`;
  // git lists the workspace's files while it is asked for its facts: both in child processes at once.
  const capturing = captureWorkspaceConcurrently(root);
  // Awaited below; a refusal before then must not leave its failure unhandled.
  capturing.catch(() => {});
  const facts = await gitFactsConcurrently(root);
  const repository = args.repository ?? environment.config.repository ?? facts.repository;
  if (repository === undefined) {
    throw new ConfigError(
      "which repository is this? pass --repository owner/name (or set `repository` in the config file, or a git remote origin)",
    );
  }
  // Asked before the tree is read and hashed: a wrong token, or a repository the tenant has not
  // onboarded, is refused at once rather than after the whole workspace was scanned.
  // The size: the command's, the configuration's, else the tenant's default_size (asked at the
  // same time as the capabilities, so it costs no round trip of its own).
  const [capabilities, size] = await Promise.all([
    client.call("sources.capabilities", { query: { repository } }),
    args.size ?? environment.config.size ?? tenantDefaultSize(client),
  ]);
  const check = args.check ? checkedCommit(root, facts.commit) : undefined;
  if (check !== undefined && check.differs.length > 0) {
    say(
      `--check: the captured workspace differs from HEAD ${check.headSha.slice(0, 12)} (uncommitted: ${check.differs.slice(0, 5).join(", ")}${check.differs.length > 5 ? `, … ${check.differs.length} paths` : ""}); the check run on that commit will describe these other bytes`,
    );
  }

  // A stop (Ctrl-C, SIGTERM, SIGHUP, a closed output) before a job exists just ends the run: a
  // later run resumes the same upload. Once the job exists it is cancelled first; while it is
  // being submitted, as soon as its id is known. A second stop ends the run at once.
  let job: string | undefined;
  let submitting = false;
  let stopped: StopSignal | undefined;
  const stops = watchStopSignals((signal) => {
    if (stopped !== undefined) process.exit(STOP_EXIT_CODES[stopped]);
    stopped = signal;
    if (job !== undefined) void requestCancellation(client, job, signal, { say, page: pageOf(job) });
    else if (!submitting) {
      say(
        `interrupted (${signal}) before a job was submitted; a later run resumes the upload; exit ${STOP_EXIT_CODES[signal]}`,
      );
      process.exit(STOP_EXIT_CODES[signal]);
    }
  });

  try {
    const capture = await capturing;
    const cacheDirectory = layoutCacheDirectory(process.env);
    const layoutCache =
      cacheDirectory === undefined ? undefined : layoutCachePath(cacheDirectory, environment.endpoint, repository);
    const bar = process.stderr.isTTY && !args.json ? progressBar() : undefined;
    let summary: UploadSummary;
    let layoutSha256: string;
    try {
      let archive: Archive;
      ({ summary, archive } = await uploadWorkspace(client, {
        repository,
        capture,
        capabilities,
        ...(layoutCache === undefined ? {} : { layoutCache }),
        onArchive: (archive) =>
          say(
            `${repository}: ${archive.totals.entries} files (${(archive.totals.file_bytes / MB).toFixed(1)} MiB, ${capture.method}) in ${archive.totals.parts} parts${archive.reusedPacks > 0 ? ` (${archive.reusedPacks} packs of the last upload reused)` : ""}`,
          ),
        ...(args.concurrency === undefined ? {} : { concurrency: args.concurrency }),
        ...(bar === undefined ? {} : { onProgress: (sent, total) => bar.update(sent, total) }),
      }));
      layoutSha256 = archive.layoutSha256;
    } finally {
      bar?.done();
    }
    emit({ type: "upload", repository, ...summary });
    say(
      `uploaded ${(summary.bytes_sent / MB).toFixed(1)} MiB in ${summary.parts_sent} parts (${summary.parts_reused} of ${summary.parts_total} already held) in ${summary.seconds.toFixed(1)} s`,
    );

    const invocation: CargoInvocation = {
      operation: args.operation,
      arguments: withTerminalColour(args.cargoArguments, {
        isTTY: process.stderr.isTTY === true,
        env: process.env,
        json: args.json,
      }),
      working_directory: workingDirectory(root, process.cwd()),
      // The workspace's place in its git repository: a check run names files by their repository path.
      ...(facts.directory === undefined ? {} : { repository_directory: facts.directory }),
      ...(args.toolchain === undefined ? {} : { toolchain: args.toolchain }),
      ...(args.artifacts.length === 0 ? {} : { artifacts: args.artifacts }),
    };
    const body: CargoWorkspaceRequest = {
      schema_version: 2,
      repository,
      // The config file's `size` is not checked here: the service refuses a size it does not know.
      size: size as Size,
      workspace: {
        base_commit: facts.commit ?? "unknown",
        branch: facts.branch ?? "unknown",
        invocation,
        source: { archive: { upload: summary.upload, manifest_sha256: summary.manifest_sha256 } },
      },
      ...(check === undefined ? {} : { check: { head_sha: check.headSha } }),
    };
    const key = `cargo-${createHash("sha256").update(JSON.stringify(body)).digest("hex").slice(0, 40)}`;
    submitting = true;
    job = await client.call("jobs.submit", { body, idempotencyKey: key });
    submitting = false;
    const page = pageOf(job);
    if (layoutCache !== undefined) {
      try {
        writeClaimedGeneration(layoutCache, layoutSha256, summary.generation);
      } catch {
        // Not kept: the next run of these bytes walks past the claimed uploads again.
      }
    }
    emit({
      type: "job",
      job,
      url: page,
      repository,
      size,
      invocation,
      ...(check === undefined ? {} : { check: { head_sha: check.headSha, workspace_differs: check.differs } }),
    });
    say(`job ${job} submitted (${size}): ${page}`);
    say("following its log; Ctrl-C cancels the job");
    if (stopped !== undefined) void requestCancellation(client, job, stopped, { say, page });

    await followLogs(
      client,
      job,
      args.json ? (record) => emit({ type: "log", ...record }) : (record) => printRecord(record, args.serviceLog),
    );
    const { job: finished, evidence } = await settledWithEvidence(client, job);
    // Stopped from outside, the run ends as the signal would have ended it, whatever the job did.
    const code = stopped === undefined ? exitCodeOf(finished, evidence) : STOP_EXIT_CODES[stopped];
    const tests = testSummary(evidence);
    const failures = lastAttemptFailures(evidence);
    let downloaded: DownloadedArtifact[] = [];
    if (args.artifacts.length > 0 && finished.status === "passed" && stopped === undefined) {
      const directory = join(root, "target", "kiln-artifacts", job);
      downloaded = await downloadArtifacts(client, job, directory);
      for (const file of downloaded) say(`artifact ${file.file} (${file.bytes} bytes)`);
    }
    emit({
      type: "result",
      job,
      url: page,
      status: finished.status,
      failure: finished.failure ?? null,
      exit_code: code,
      cargo_exit_code: stopped !== undefined || code === EXIT.service ? null : code,
      interrupted: stopped ?? null,
      tests: {
        ...tests.total,
        by_target: tests.byTarget,
        failed_tests: tests.failed,
        flaky_tests: tests.flaky.map((f) => ({ test: f.test, passed_on_try: f.passedOnTry, tries: f.tries })),
      },
      failures,
      artifacts: downloaded,
    });
    if (args.junit !== undefined && stopped === undefined) {
      const path = resolve(args.junit);
      await writeFile(path, renderJunitXml(evidence));
      say(`junit ${path}`);
    }
    if (Object.keys(tests.byTarget).length > 0) {
      const cancelled = finished.status === "cancelled" ? "; the tests still running were cancelled (not run)" : "";
      say(`test summary: ${describeCounts(tests.total)}${cancelled}`);
      for (const name of tests.failed) say(`  failed: ${name}`);
      for (const line of describeFlaky(tests.flaky)) say(line);
    }
    if (failures.length > 0) {
      say("what failed:");
      for (const line of describeFailures(failures)) say(`  ${line}`);
    }
    say(`job ${job} ${describeEnd(finished, stopped)}: ${page}; exit ${code}`);
    if (code !== 0) throw new CliExit(code);
  } catch (error) {
    // Stopped from outside and then unable to follow the job to its end: still the signal's code.
    if (stopped === undefined || error instanceof CliExit) throw error;
    err(`kiln: ${error instanceof Error ? error.message : String(error)}`);
    throw new CliExit(STOP_EXIT_CODES[stopped]);
  } finally {
    stops.release();
  }
}

/** How the job ended, in the final line's words. */
function describeEnd(job: Job, stopped: StopSignal | undefined): string {
  if (job.status === "cancelled") return stopped === undefined ? "cancelled (elsewhere)" : `cancelled (${stopped})`;
  const failure = job.failure;
  const ended = `${job.status}${failure ? ` (${failure.cause}: ${failure.detail})` : ""}`;
  return stopped === undefined ? ended : `${ended} before the cancellation (${stopped}) reached it`;
}

/** How long a stopped run waits for its cancelled job to end before it exits all the same. */
const CANCELLATION_WAIT_MS = 30_000;

/**
 * Cancels the job after a stop (jobs.cancel); the log being followed then settles and the run
 * ends with the stop's exit code. Should the job not end in time (the service unreachable), the
 * run exits anyway, saying where to look.
 */
async function requestCancellation(
  client: KilnClient,
  job: string,
  signal: StopSignal,
  out: { say: (line: string) => void; page: string },
): Promise<void> {
  out.say(`interrupted: cancelling job ${job} (${signal})`);
  setTimeout(() => {
    out.say(
      `job ${job} had not ended ${CANCELLATION_WAIT_MS / 1000} s after its cancellation was requested; see ${out.page}; exit ${STOP_EXIT_CODES[signal]}`,
    );
    process.exit(STOP_EXIT_CODES[signal]);
  }, CANCELLATION_WAIT_MS).unref();
  try {
    await client.call("jobs.cancel", { params: { id: job }, idempotencyKey: `cancel-${job}` });
  } catch (error) {
    // Already terminal (conflict): the log settles on its own. Anything else: said, and the run
    // still ends when the log does (or at the deadline).
    if (!(error instanceof KilnRefusal && error.code === "conflict")) {
      err(`kiln: could not cancel job ${job}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

export function registerCargoCommand(program: Command): void {
  program
    .command("cargo")
    .description("run cargo <operation> remotely on this workspace: upload what changed, stream the log, exit as cargo")
    .usage(
      "[+toolchain] <build|check|test|clippy|doc|bench> [cargo args…] [--size SIZE] [--toolchain T] [--repository owner/name] [--artifact PATTERN…] [--concurrency N] [--junit PATH] [--service-log] [--check] [--json]",
    )
    .helpOption(false)
    .passThroughOptions()
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .argument("[arguments...]")
    .addHelpText(
      "after",
      [
        "",
        "The workspace is the nearest Cargo.toml upward with [workspace] (else the nearest Cargo.toml);",
        "with git its tracked and untracked-not-ignored files are captured (executable bits and symlinks",
        "kept), without git every file but target/ and .git/. Only parts the service lacks are sent.",
        "Cargo's output is shown as cargo prints it; --service-log adds the service's own lines",
        "(placement, sandbox, cache) marked [kiln]. The job's page is printed at submission and at the end.",
        "On a terminal cargo runs with --color=always (CARGO_TERM_COLOR and NO_COLOR are honoured; your own --color wins).",
        "Ctrl-C, SIGTERM and SIGHUP (and a closed output) cancel the job, then exit 130, 143 and 129 (141);",
        "a second one exits at once.",
        "",
        "--json prints JSON lines on stdout: {type:upload…}, {type:job…}, one {type:log…} per log",
        "record, and a final {type:result, status, exit_code, tests, artifacts}.",
        "Artifacts (--artifact, patterns relative to the target directory, e.g. release/mybin) are",
        "saved under target/kiln-artifacts/<job>/.",
        "--junit PATH writes the job's test results as JUnit XML (the job's junit.xml artifact's document).",
      ].join("\n"),
    )
    .action(async (_: string[], __: unknown, command: Command) => {
      const raw = command.args;
      if (raw.length === 0 || raw[0] === "--help" || raw[0] === "-h") {
        command.outputHelp();
        return;
      }
      await runCommand(raw.includes("--json"), () => runCargo(raw));
    });
}

/**
 * `--check`: the commit the check run reports on is HEAD, and the paths where the captured
 * workspace differs from it (uncommitted changes, untracked files the capture takes): the check
 * would then describe other bytes than the commit, which the run says before submitting.
 */
function checkedCommit(root: string, head: string | undefined): { headSha: string; differs: string[] } {
  if (head === undefined || !/^[0-9a-f]{40}$/.test(head)) {
    throw new ConfigError("--check reports a check run for HEAD, and this workspace has no git commit");
  }
  return { headSha: head, differs: uncommittedPaths(root) };
}

/**
 * The tenant's `default_size` setting (tenant.settings.get, read scope), or the platform's while
 * the credential may not read the tenant's settings: the service refuses a size the tenant does
 * not allow, saying which it does.
 */
async function tenantDefaultSize(client: KilnClient): Promise<string> {
  try {
    const settings = await client.call("tenant.settings.get", {});
    const value = settings.settings.find((s) => s.name === "default_size")?.value;
    return typeof value === "string" ? value : PLATFORM_DEFAULT_SIZE;
  } catch (error) {
    if (error instanceof KilnRefusal && error.refusal.status === 403) return PLATFORM_DEFAULT_SIZE;
    throw error;
  }
}
