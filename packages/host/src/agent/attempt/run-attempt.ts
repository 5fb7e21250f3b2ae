import { messageOf } from "@kiln/contract";
import type { ExecutionResult } from "../../executor/executor.js";
import { GatewayError } from "../../gateway/gateway-error.js";
import { invocationKey, planAffectedTests } from "../affected-tests.js";
import type { AttemptLineage } from "../attempt-lineage.js";
import type { AttemptFailure, AttemptReport, AttemptResult, FinishAnswer, Placement } from "../host-protocol.js";
import { admitAttemptToolchain } from "./admit-attempt-toolchain.js";
import { AttemptContext, type AttemptRunnerDeps } from "./attempt-context.js";
import { attemptOutcome, failureOf, hostFailure } from "./attempt-outcome.js";
import { startHeartbeat } from "./heartbeat.js";
import { injectedEnvironment, injectionItems } from "./injections.js";
import {
  crateCacheItem,
  dependencyReport,
  FetchCeilingReached,
  gatewayFailure,
  type ProvidedForBuild,
  provideDependencies,
} from "./provide-dependencies.js";
import { provisionSource } from "./provision-source.js";
import { publishArtifacts, publishJunit, publishTimings } from "./publish-artifacts.js";
import { restoreAttemptLineage } from "./restore-attempt-lineage.js";
import { CARGO_TIMINGS_REPORT, type CargoRun, cargoStep, runCargo } from "./run-cargo.js";

/** How an attempt ended for the agent: the control plane's answer to its result, and that result's outcome. */
export interface AttemptEnd {
  readonly answer: FinishAnswer;
  readonly outcome: AttemptResult["outcome"];
}

/**
 * Runs one placed attempt through its phases — provision, toolchain, restore, build or test,
 * publish, save — and reports its result. A phase that throws fails the job on this attempt
 * with that phase and cause (`infrastructure`), reported to the control plane, the job's log
 * and the host's events: the control plane never has to guess from a lapsed lease. Only a
 * lost lease (a `stale` answer) means the attempt does not report at all.
 */
export async function runAttempt(deps: AttemptRunnerDeps, placement: Placement): Promise<AttemptEnd> {
  const attempt = new AttemptContext(deps, placement);
  deps.reporting.emit({ type: "attempt:start", jobId: placement.jobId, attempt: placement.attempt });
  const heartbeat = startHeartbeat({
    protocol: deps.protocol,
    ref: attempt.ref,
    clock: deps.clock,
    everyMs: (deps.heartbeatSeconds ?? 2) * 1000,
    reporting: deps.reporting,
    onStop: (answer) => {
      attempt.cancelled = answer === "cancel";
      attempt.logs.stale ||= answer === "stale";
      attempt.abort.abort();
    },
  });
  let lineage: AttemptLineage | null = null;
  let phase = "provision";
  try {
    attempt.system(
      `kiln: attempt ${placement.attempt} of ${placement.jobId} on ${deps.hostId} (${placement.size}: ${placement.limits.vcpus} vCPU, ${Math.round(placement.limits.memoryBytes / 2 ** 30)} GiB)`,
    );
    attempt.system(`kiln: network policy ${placement.network.policy}: ${placement.network.reason}`);
    await provisionSource(attempt);

    phase = "toolchain";
    const toolchain = await admitAttemptToolchain(attempt);
    if ("refused" in toolchain) {
      return await failedBeforeCargo(attempt, {
        phase: "provision",
        cause: "toolchain_not_admitted",
        detail: toolchain.refused,
      });
    }

    phase = "restore";
    const restored = await restoreAttemptLineage(attempt);
    lineage = restored.lineage;

    phase = "fetch";
    const provided = await provideIfGateway(attempt, { toolchain: toolchain.admitted, targetDir: restored.targetDir });
    const generatedLockfile = provided?.dependencies.generatedLockfile ?? null;
    if (lineage !== null && generatedLockfile !== null) {
      const seeded = await lineage.seedFromGeneratedLockfile(generatedLockfile);
      if (seeded !== null) attempt.system(`kiln: ${seeded}`);
    }

    phase = "plan";
    const testKey = invocationKey(placement, injectedEnvironment(placement));
    const affected = await planAffectedTests(placement, lineage, attempt.dirs.workspace, testKey);
    if (affected.evidence !== null) {
      attempt.system(`kiln: affected_tests ${affected.evidence.enabled ? "on" : "off"}: ${affected.evidence.reason}`);
    }

    phase = cargoStep(placement);
    const building = lineage;
    const cargo = await runCargo(attempt, {
      toolchain: toolchain.admitted,
      targetDir: restored.targetDir,
      warmTarget: lineage?.warm ?? false,
      arguments: affected.arguments,
      provided,
      ...(building === null
        ? {}
        : {
            onBuildFinished: () =>
              building.writeBackEarly((error) =>
                deps.reporting.log.warn(
                  { jobId: placement.jobId, attempt: placement.attempt, err: error },
                  "the target disk's early write-back failed; the save writes it all back",
                ),
              ),
          }),
    });
    const outcome = attemptOutcome(cargo.run, attempt.cancelled);

    phase = "publish";
    const artifacts =
      outcome === "passed" && cargo.run !== null ? await publishArtifacts(attempt, restored.targetDir) : [];
    const timings =
      cargo.run === null
        ? null
        : await publishTimings(attempt, restored.targetDir, CARGO_TIMINGS_REPORT, cargo.run.startedAt);
    if (timings !== null) artifacts.push(timings.artifact);
    if (cargoStep(placement) === "test" && cargo.summary.tests.length > 0) {
      artifacts.push(
        await publishJunit(attempt, {
          tests: cargo.summary.tests,
          ...(cargo.testRuns === null ? {} : { test_binaries: cargo.testRuns.testBinaries }),
        }),
      );
    }

    // Before the result: the next job of the lineage may be claimed the moment this one is terminal.
    phase = "save";
    if (lineage !== null) {
      // A passing run that tested every package a plain `cargo test` tests (given what the
      // baseline vouches for) is the next affected_tests baseline; otherwise the old one stays.
      if (cargo.run !== null && outcome === "passed" && affected.coversEverything) {
        lineage.nextTestBaseline = {
          sources: Object.fromEntries(placement.source.map((entry) => [entry.path, entry.sha256])),
          job: placement.jobId,
          invocation: testKey,
        };
      }
      // Nothing ran, so nothing of the slot changed: it is checked back in as it was. A target
      // dir at its disk quota is dropped like an interrupted one: the next job would start full.
      const ended = cargo.run?.diskQuotaExceeded ? "disk_quota_exceeded" : (cargo.run?.outcome ?? "exited");
      const saving = lineage;
      attempt.system(`kiln: ${await attempt.phases.run("save", () => saving.save(ended, deps.clock.now()))}`);
    }

    phase = "report";
    const cargoOutput = await deps.protocol.putBlob(cargo.output);
    return await report(attempt, {
      outcome,
      exitCode: cargo.run?.exitCode ?? null,
      failure: failureOf(placement, outcome, cargo.run, cargo.summary),
      report: {
        ...assembleReport(attempt, cargo, lineage, affected.evidence, provided),
        ...(timings?.timeline == null ? {} : { timeline: timings.timeline }),
      },
      cargoOutput,
      lineageSave: lineage?.lineageSave() ?? null,
      artifacts,
    });
  } catch (error) {
    const ended = endedInFetch(attempt, phase, error);
    if (ended !== null) {
      // Cargo never ran in the lineage's slot: it goes back as it was (a tenant's dependency
      // failure is not a reason to make its next job cold).
      if (lineage !== null) attempt.system(`kiln: ${await lineage.giveBack()}`);
      return await failedBeforeCargo(attempt, ended.failure, ended.outcome);
    }
    deps.reporting.emit({ type: "attempt:error", jobId: placement.jobId, attempt: placement.attempt, phase, error });
    deps.reporting.log.error(
      { jobId: placement.jobId, attempt: placement.attempt, phase, err: error },
      `attempt failed in ${phase}: ${messageOf(error)}`,
    );
    return await failedBeforeCargo(attempt, hostFailure(phase, error));
  } finally {
    heartbeat.stop();
    await lineage?.abandon(deps.clock.now()).catch((error: unknown) => {
      deps.reporting.emit({ type: "cleanup:error", what: `lineage slot of ${attempt.attemptId}`, error });
      deps.reporting.log.warn({ attempt: attempt.attemptId, err: error }, "the lineage slot could not be given up");
    });
    // The sandbox is gone and the outcome reported; what is left is disk work (the workspace,
    // and any lineage slot dropped into the attempt), which the next job need not wait for.
    const { base, scratch } = attempt.dirs;
    const removal = deps.isolation
      .removeDirectories(scratch === base ? [base] : [base, scratch])
      .catch((error: unknown) => {
        deps.reporting.emit({ type: "cleanup:error", what: `directories of ${attempt.attemptId}`, error });
        deps.reporting.log.warn({ attempt: attempt.attemptId, err: error }, "attempt directories could not be removed");
      });
    if (deps.inBackground !== undefined) deps.inBackground(removal);
    else await removal;
  }
}

/**
 * How an attempt that stopped in its fetch phase ended, when that is the job's own result: the
 * gateway could not provide its dependencies (cause `dependencies`), the fetch reached the
 * job's wall-clock ceiling, or the job was cancelled (or its lease lost) while fetching.
 * Null for anything else (an error of the host).
 */
function endedInFetch(
  attempt: AttemptContext,
  phase: string,
  error: unknown,
): { failure: AttemptFailure; outcome: AttemptResult["outcome"] } | null {
  if (error instanceof GatewayError) return { failure: gatewayFailure(error), outcome: "failed" };
  if (error instanceof FetchCeilingReached) {
    return {
      failure: { phase: "fetch", cause: "wall_clock_ceiling", detail: error.message },
      outcome: "failed",
    };
  }
  if (phase === "fetch" && attempt.abort.signal.aborted) {
    return {
      failure: {
        phase: "fetch",
        cause: "cancelled",
        detail: "cancelled while its dependencies were fetched; the fetch was stopped",
      },
      outcome: "cancelled",
    };
  }
  return null;
}

/** Reports an attempt that failed before cargo produced anything: the failure in its log and result. */
async function failedBeforeCargo(
  attempt: AttemptContext,
  failure: AttemptFailure,
  outcome: AttemptResult["outcome"] = "failed",
): Promise<AttemptEnd> {
  attempt.system(`kiln: ${failure.detail}`);
  return report(attempt, {
    outcome,
    exitCode: null,
    failure,
    report: { phases: attempt.phases.phases, crates: [], tests: [], unit: null },
    cargoOutput: null,
    lineageSave: null,
    artifacts: [],
  });
}

/** Phase `fetch`: a dependency-gateway job's packages, provided by the host's gateway. */
async function provideIfGateway(
  attempt: AttemptContext,
  build: Parameters<typeof provideDependencies>[2],
): Promise<ProvidedForBuild | null> {
  if (attempt.placement.network.policy !== "dependency-gateway") return null;
  const gateway = attempt.deps.gateway;
  if (gateway === undefined) {
    throw new Error("this host has no dependency gateway, and the job's dependencies come from outside its workspace");
  }
  return provideDependencies(attempt, gateway, build);
}

/**
 * Flushes the log and hands the result to the control plane, unless the attempt lost its
 * lease (a stale log shipment or heartbeat): a newer attempt owns the job then.
 */
async function report(attempt: AttemptContext, result: AttemptResult): Promise<AttemptEnd> {
  await attempt.logs.flush();
  if (attempt.logs.stale) return { answer: "stale", outcome: result.outcome };
  const answer = await attempt.deps.protocol.finish(attempt.ref, result);
  return { answer, outcome: result.outcome };
}

/** The attempt's evidence from what each phase measured. */
function assembleReport(
  attempt: AttemptContext,
  cargo: CargoRun,
  lineage: AttemptLineage | null,
  affected: AttemptReport["affected_tests"] | null,
  provided: ProvidedForBuild | null,
): AttemptReport {
  const { placement, deps } = attempt;
  const run: ExecutionResult | null = cargo.run;
  return {
    phases: attempt.phases.phases,
    crates: [...cargo.summary.crates],
    tests: [...cargo.summary.tests],
    ...(cargo.summary.failures.length === 0 ? {} : { failures: [...cargo.summary.failures] }),
    caches: [
      ...(lineage === null ? [] : [lineage.cacheItem(cargo.summary.crates)]),
      ...(provided === null ? [] : [crateCacheItem(provided.dependencies, deps.hostId)]),
    ],
    ...(provided === null ? {} : { dependencies: dependencyReport(provided.dependencies) }),
    ...(cargo.testRuns === null
      ? {}
      : {
          ...(cargo.testRuns.testBinaries.length === 0 ? {} : { test_binaries: cargo.testRuns.testBinaries }),
          retries: cargo.testRuns.retries,
        }),
    injections: injectionItems(placement),
    ...(affected === null ? {} : { affected_tests: affected }),
    // No unit ran when affected_tests left nothing to test.
    unit:
      run === null
        ? null
        : {
            id: attempt.attemptId,
            host: deps.hostId,
            isolation: run.isolation,
            // Why this isolation: KILN_EXECUTOR and, for auto, what the host's KVM probe found.
            isolation_reason: deps.isolation.choice.reason,
            started_at: run.startedAt.toISOString(),
            finished_at: run.finishedAt.toISOString(),
            vcpus: placement.limits.vcpus,
            memory_bytes: placement.limits.memoryBytes,
            exit_code: run.exitCode,
            cpu_seconds: run.cpuSeconds,
            peak_memory_bytes: run.peakMemoryBytes,
            oom_killed: run.oomKilled,
            disk_bytes: run.diskBytes,
            disk_used_bytes: run.diskUsedBytes,
            disk_quota_exceeded: run.diskQuotaExceeded,
          },
  };
}
