import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { messageOf } from "@kiln/contract";
import { AttemptLineage } from "../attempt-lineage.js";
import type { AttemptContext } from "./attempt-context.js";

/**
 * Phase `restore`: hands the job's warm lineage to the attempt, or an empty target dir. A
 * lineage is an optimization: one that cannot be restored is said in the log and the attempt
 * runs cold.
 */
export async function restoreAttemptLineage(
  attempt: AttemptContext,
): Promise<{ lineage: AttemptLineage | null; targetDir: string }> {
  const { deps, dirs, placement } = attempt;
  const store = deps.lineages;
  let lineage: AttemptLineage | null = null;
  if (store !== undefined) {
    lineage = await attempt.phases.run(
      "restore",
      () =>
        AttemptLineage.restore(
          store,
          placement,
          { attemptDir: dirs.base, workspaceDir: dirs.workspace, attemptId: attempt.attemptId },
          deps.clock.now().getTime(),
        ).catch((error: unknown) => {
          attempt.system(`kiln: the lineage could not be restored, running cold: ${messageOf(error)}`);
          return null;
        }),
      (restored) => (restored === null ? "failed" : "passed"),
    );
  }
  if (lineage !== null) {
    for (const note of lineage.notes) attempt.system(`kiln: ${note}`);
    return { lineage, targetDir: lineage.targetDir };
  }
  const targetDir = join(dirs.base, "target");
  await mkdir(targetDir, { recursive: true });
  return { lineage: null, targetDir };
}
