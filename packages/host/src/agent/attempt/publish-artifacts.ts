import { withTargetTree } from "../../executor/shared/target-disk.js";
import { collectArtifacts } from "../collect-artifacts.js";
import type { AttemptResult } from "../host-protocol.js";
import type { AttemptContext } from "./attempt-context.js";

/** Phase `publish`: the files the invocation asked for, from the target dir to blobs. */
export async function publishArtifacts(
  attempt: AttemptContext,
  targetDir: string,
): Promise<AttemptResult["artifacts"]> {
  return attempt.phases.run("publish", async () => {
    const patterns = attempt.placement.invocation.artifacts ?? [];
    if (patterns.length === 0) return [];
    // The sandbox executor's target dir is a disk image: read through a read-only mount of it.
    return withTargetTree(targetDir, async (tree) => {
      const published = [];
      for (const file of await collectArtifacts(tree, patterns)) {
        const stored = await attempt.deps.protocol.putBlob(await file.read());
        published.push({ path: file.path, bytes: stored.bytes, sha256: stored.sha256 });
      }
      return published;
    });
  });
}
