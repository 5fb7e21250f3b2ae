import { messageOf } from "@kiln/contract";
import type { AdmittedToolchain } from "../../executor/executor.js";
import type { AttemptContext } from "./attempt-context.js";

/**
 * The toolchain admitted with the job, as this host has it installed; or why not, which fails
 * the job with cause toolchain_not_admitted (a toolchain is never silently replaced).
 */
export async function admitAttemptToolchain(
  attempt: AttemptContext,
): Promise<{ admitted: AdmittedToolchain } | { refused: string }> {
  try {
    return { admitted: await attempt.deps.resolveToolchain(attempt.placement.toolchain) };
  } catch (error) {
    const detail = messageOf(error);
    attempt.system(`kiln: toolchain ${attempt.placement.toolchain} is not admitted: ${detail}`);
    return { refused: detail };
  }
}
