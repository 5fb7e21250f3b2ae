import { mkdir } from "node:fs/promises";
import { materializeSource } from "../materialize-source.js";
import type { AttemptContext } from "./attempt-context.js";

/** Phase `provision`: the attempt's directories, and the job's exact source bytes in its workspace. */
export async function provisionSource(attempt: AttemptContext): Promise<void> {
  const { dirs, placement, deps } = attempt;
  await attempt.phases.run("provision", async () => {
    for (const dir of [dirs.workspace, dirs.home]) await mkdir(dir, { recursive: true });
    await materializeSource(dirs.workspace, placement.source, (sha256) => deps.protocol.fetchBlob(sha256));
  });
}
