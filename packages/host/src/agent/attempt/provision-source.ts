import { chmod, mkdir } from "node:fs/promises";
import { materializeSource } from "../materialize-source.js";
import type { AttemptContext } from "./attempt-context.js";

/**
 * Phase `provision`: the attempt's directories, and the job's exact source bytes in its
 * workspace. The attempt's own directories are 0700 (root's): no other user of the host can
 * read a tenant's source, target or cargo home while the job runs; the sandbox reaches them
 * only through the bind mounts its launcher makes, which do not traverse these parents.
 */
export async function provisionSource(attempt: AttemptContext): Promise<void> {
  const { dirs, placement, deps } = attempt;
  await attempt.phases.run("provision", async () => {
    for (const dir of new Set([dirs.base, dirs.scratch])) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await chmod(dir, 0o700);
    }
    for (const dir of [dirs.workspace, dirs.home]) await mkdir(dir, { recursive: true });
    await materializeSource(dirs.workspace, placement.source, (sha256) => deps.protocol.fetchBlob(sha256));
  });
}
