import { join } from "node:path";
import type { AttemptFailure, CacheItem, DependencyReport } from "@kiln/contract";
import type { AdmittedToolchain } from "../../executor/executor.js";
import type { ProvidedDependencies } from "../../gateway/dependency-gateway.js";
import { GatewayError } from "../../gateway/gateway-error.js";
import type { DependencyProvider } from "../../gateway/worker-gateway.js";
import { SANDBOX_MOUNTS } from "../attempt-lineage.js";
import { captureGeneratedLockfiles, lockfileCandidates } from "../generated-lockfiles.js";
import { LineSplitter } from "../line-splitter.js";
import { workspaceLockfile } from "../lineage-seeding.js";
import type { AttemptContext } from "./attempt-context.js";
import { injectedEnvironment } from "./injections.js";

/** Where the gateway's packages and configuration appear inside the sandbox (read-only). */
export const SANDBOX_DEPS_DIR = "/kiln/deps";

/** Most Cargo.toml files read as roots of resolution (a workspace has far fewer). */
const MAX_MANIFESTS = 4000;

/** The fetch phase reached the job's wall-clock ceiling: the job fails with cause `wall_clock_ceiling`. */
export class FetchCeilingReached extends Error {
  constructor(readonly seconds: number) {
    super(`the attempt ran past its ${seconds} s wall-clock ceiling while its dependencies were fetched`);
    this.name = "FetchCeilingReached";
  }
}

/** What the build runs with once the gateway provided the job's packages. */
export interface ProvidedForBuild {
  readonly dependencies: ProvidedDependencies;
  /** The `--config` cargo is given (the generated configuration, inside the sandbox). */
  readonly cargoConfig: string;
  readonly readOnlyBinds: readonly { source: string; target: string }[];
}

/**
 * Phase `fetch` of a `dependency-gateway` job: the gateway provides the packages its
 * Cargo.lock locks (having cargo generate the lock in the sandbox first when the source has
 * none), the job's log says what came from the cache and what from upstream, and the build
 * then runs with the generated configuration and still no network.
 *
 * The job's wall-clock ceiling starts here: an upstream that never answers, or a fetch that
 * never ends, ends the phase at the ceiling (FetchCeilingReached), and cancellation ends it at
 * once. Either aborts the gateway, whose worker is killed with everything it started, so
 * nothing is retried after.
 */
export async function provideDependencies(
  attempt: AttemptContext,
  gateway: DependencyProvider,
  build: { readonly toolchain: AdmittedToolchain; readonly targetDir: string },
): Promise<ProvidedForBuild> {
  const { placement, dirs, deps } = attempt;
  const depsDir = join(dirs.base, "deps");
  const readOnlyBinds = [{ source: depsDir, target: SANDBOX_DEPS_DIR }];
  const workingDirectory = placement.invocation.working_directory ?? ".";
  attempt.startCeiling();
  const fetching = new AbortController();
  let ceilingReached = false;
  const stop = () => fetching.abort(attempt.abort.signal.reason);
  if (attempt.abort.signal.aborted) stop();
  attempt.abort.signal.addEventListener("abort", stop, { once: true });
  const ceiling = deps.clock.after(Math.max(0, attempt.ceilingLeftMs()), () => {
    ceilingReached = true;
    fetching.abort(new FetchCeilingReached(placement.wallClockSeconds));
  });
  let provided: ProvidedDependencies;
  try {
    provided = await attempt.phases.run("fetch", async () =>
      gateway.provide({
        tenant: placement.tenant,
        attemptId: attempt.attemptId,
        workspaceDir: dirs.workspace,
        lockfile: await workspaceLockfile(dirs.workspace, placement),
        manifestPaths: placement.source
          .filter((e) => e.kind !== "symlink" && /(^|\/)Cargo\.toml$/.test(e.path))
          .slice(0, MAX_MANIFESTS)
          .map((e) => e.path),
        depsDir,
        sandboxDepsDir: SANDBOX_DEPS_DIR,
        credentials: async () => {
          const grants = await deps.protocol.registryCredentials(attempt.ref);
          deps.credentialHolds?.hold(attempt.attemptId, placement.tenant, grants);
          return grants;
        },
        generateLockfile: (config, environment) =>
          generateLockfile(attempt, {
            ...build,
            config,
            environment,
            readOnlyBinds,
            workingDirectory,
            signal: fetching.signal,
          }),
        log: (line) => attempt.system(`kiln: dependency gateway: ${line}`),
        signal: fetching.signal,
      }),
    );
  } catch (error) {
    if (ceilingReached) throw new FetchCeilingReached(placement.wallClockSeconds);
    throw error;
  } finally {
    ceiling.cancel();
    attempt.abort.signal.removeEventListener("abort", stop);
  }
  const { cache } = provided;
  attempt.system(
    `kiln: dependency gateway: ${provided.lockedCrates.length} locked crates provided (${cache.hits} from the host's crate cache, ${cache.misses} downloaded, ${cache.bytesFetched} bytes fetched); configuration sha256 ${provided.configurationSha256}`,
  );
  return { dependencies: provided, cargoConfig: provided.sandboxConfigPath, readOnlyBinds };
}

/** The evidence `caches` item of the crate cache for one attempt. */
export function crateCacheItem(provided: ProvidedDependencies, hostId: string): CacheItem {
  const { cache } = provided;
  return {
    lineage: `crate-cache@${hostId}`,
    class: "dependency-gateway",
    outcome: cache.misses === 0 ? "warm" : "cold",
    reason:
      cache.misses === 0
        ? null
        : `${cache.misses} of ${cache.hits + cache.misses} locked crates were not in the host's crate cache`,
    restored_bytes: cache.bytesFromCache,
    saved_bytes: cache.bytesFetched,
    hits: cache.hits,
    misses: cache.misses,
    bytes_fetched: cache.bytesFetched,
  };
}

/** What the job record carries of the gateway's work: the configuration's digest and what it came from, never its text. */
export function dependencyReport(provided: ProvidedDependencies): DependencyReport {
  return {
    configuration_sha256: provided.configurationSha256,
    locked_crates: provided.lockedCrates.map((c) => ({ ...c })),
    git_sources: provided.gitSources.map((g) => ({ ...g })),
    generated_lockfile: provided.generatedLockfile !== null,
  };
}

/** The job's failure when the gateway could not provide its packages, naming the registry and the cause. */
export function gatewayFailure(error: GatewayError): AttemptFailure {
  return { phase: "fetch", cause: "dependencies", detail: `${error.kind}: ${error.message}` };
}

/** `cargo generate-lockfile` in the sandbox, against the gateway's gathered index; returns the lock it wrote. */
async function generateLockfile(
  attempt: AttemptContext,
  input: {
    readonly toolchain: AdmittedToolchain;
    readonly targetDir: string;
    readonly config: string;
    readonly environment: Readonly<Record<string, string>>;
    readonly readOnlyBinds: readonly { source: string; target: string }[];
    readonly workingDirectory: string;
    /** The fetch phase's signal: cancellation, or the ceiling. */
    readonly signal: AbortSignal;
  },
): Promise<string> {
  const { deps, placement, dirs } = attempt;
  const stderr = new LineSplitter((line) => attempt.logs.push("stderr", line));
  // Offline unless git dependencies need cargo's git (from the gateway's file:// copies): the configuration says.
  const argv = ["cargo", "--config", input.config, "generate-lockfile"];
  attempt.system(`kiln: ${argv.join(" ")} (no network)`);
  const run = await deps.isolation.executor.run({
    attemptId: `${attempt.attemptId}-lock`,
    limits: placement.limits,
    workspaceDir: dirs.workspace,
    targetDir: input.targetDir,
    homeDir: dirs.home,
    mounts: SANDBOX_MOUNTS,
    readOnlyBinds: input.readOnlyBinds,
    toolchain: input.toolchain,
    argv,
    workingDirectory: input.workingDirectory,
    environment: {
      ...(placement.invocation.environment ?? {}),
      ...injectedEnvironment(placement),
      ...input.environment,
      CARGO_TERM_COLOR: "never",
    },
    wallClockSeconds: attempt.ceilingLeftSeconds(),
    network: "offline",
    signal: input.signal,
    onOutput: (_stream, chunk) => stderr.push(chunk),
  });
  stderr.end();
  if (run.outcome === "wall_clock_ceiling") throw new FetchCeilingReached(placement.wallClockSeconds);
  // Cancelled (the job, or the ceiling through the fetch's signal): the phase's signal says why.
  if (run.outcome === "cancelled") throw input.signal.reason ?? new Error("cancelled");
  if (run.outcome !== "exited" || run.exitCode !== 0) {
    throw new GatewayError(
      "resolution_failed",
      `cargo could not resolve the workspace's dependencies against the registry index (${run.outcome === "exited" ? `exit ${run.exitCode}` : run.outcome}); its output is in the log`,
    );
  }
  const [lock] = await captureGeneratedLockfiles(
    dirs.workspace,
    lockfileCandidates(placement.source, input.workingDirectory),
  );
  if (lock === undefined) throw new Error("cargo generate-lockfile succeeded but left no Cargo.lock");
  return Buffer.from(lock.content_base64, "base64").toString("utf8");
}
