import type { AttemptResult } from "../host-protocol.js";
import type { AttemptContext } from "./attempt-context.js";

/** The most files one attempt publishes. */
const MAX_ARTIFACTS = 1000;

/** Phase `publish`: the files the invocation asked for, from the target dir to blobs. */
export async function publishArtifacts(
  attempt: AttemptContext,
  targetDir: string,
): Promise<AttemptResult["artifacts"]> {
  return attempt.phases.run("publish", async () => {
    const patterns = attempt.placement.invocation.artifacts ?? [];
    if (patterns.length === 0) return [];
    // Read as the isolation may read what its job wrote (target-disk.ts, guest-disks.ts).
    return attempt.deps.isolation.withTargetFiles(targetDir, patterns, MAX_ARTIFACTS, async (files) => {
      const published = [];
      for (const file of files) {
        const stored = await attempt.deps.protocol.putBlob(await file.read());
        published.push({ path: file.path, bytes: stored.bytes, sha256: stored.sha256, executable: file.executable });
      }
      return published;
    });
  });
}
