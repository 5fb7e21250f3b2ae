import type { ExecutionOutcome, ExecutionRequest, ExecutionResult } from "../executor.js";
import { requestProblem } from "./request-problem.js";

/** Builds the attempt's result: what was not measured is null or false; the detail is the attempt's. */
export type ResultOf = (outcome: ExecutionOutcome, measured?: Partial<ExecutionResult>) => ExecutionResult;

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The start every executor makes, in one order, with one wording: the result builder, then the
 * refusals before anything of the job runs — already cancelled, the executor's setup failed (it
 * is tried again next time), the request refused (request-problem.ts).
 */
export async function beginAttempt<Setup>(
  isolation: ExecutionResult["isolation"],
  request: ExecutionRequest,
  setup: () => Promise<Setup>,
  /** The executor's own paths inside (its toolchain mount point, …), reserved like the system's. */
  reserved: readonly string[],
): Promise<
  | { readonly result: ResultOf; readonly detail: string[]; readonly setup: Setup }
  | { readonly refused: ExecutionResult }
> {
  const startedAt = new Date();
  const detail: string[] = [];
  const result: ResultOf = (outcome, measured = {}) => ({
    outcome,
    exitCode: null,
    signal: null,
    oomKilled: false,
    diskQuotaExceeded: false,
    diskBytes: null,
    diskUsedBytes: null,
    cpuSeconds: null,
    peakMemoryBytes: null,
    ...measured,
    startedAt,
    finishedAt: new Date(),
    isolation,
    detail,
  });
  const what = isolation === "sandbox" ? "the sandbox" : "the microVM";
  if (request.signal.aborted) {
    detail.push(`cancelled before ${what} started`);
    return { refused: result("cancelled") };
  }
  let ready: Setup;
  try {
    ready = await setup();
  } catch (error) {
    detail.push(`${isolation === "sandbox" ? "sandbox" : "microVM"} setup failed: ${errorText(error)}`);
    return { refused: result("infrastructure") };
  }
  const problem = await requestProblem(request, reserved);
  if (problem !== null) {
    detail.push(`request refused: ${problem}`);
    return { refused: result("infrastructure") };
  }
  return { result, detail, setup: ready };
}
