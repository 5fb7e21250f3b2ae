import { type JunitEvidenceInput, renderJunitXml, type TimelineItem } from "@kiln/contract";
import { summariseCargoTimings } from "../../evidence/cargo-timings.js";
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

/** The most bytes of a `--timings` report read (cargo's for 2,000 units is a few MiB). */
const MAX_TIMINGS_REPORT_BYTES = 64 * 2 ** 20;

/** The artifact path of a test job's JUnit XML. */
export const JUNIT_ARTIFACT = "junit.xml";

/**
 * A test job's `junit.xml` artifact (issue 37): its test results rendered by the contract's
 * renderJunitXml, the same document `kiln cargo test --junit` writes; published whether the
 * tests passed or not (a failing run is when it is wanted most).
 */
export async function publishJunit(
  attempt: AttemptContext,
  report: JunitEvidenceInput["report"],
): Promise<AttemptResult["artifacts"][number]> {
  const stored = await attempt.deps.protocol.putBlob(Buffer.from(renderJunitXml({ report })));
  return { path: JUNIT_ARTIFACT, bytes: stored.bytes, sha256: stored.sha256, executable: false };
}

/**
 * Cargo's `--timings` report of the attempt (issue 37 item 5): published as an artifact at its
 * target-dir path and summarised for the evidence's timeline. Null when cargo wrote none (it
 * stopped before building, or the operation is not timed).
 */
export async function publishTimings(
  attempt: AttemptContext,
  targetDir: string,
  reportPath: string,
  cargoStarted: Date,
): Promise<{ artifact: AttemptResult["artifacts"][number]; timeline: TimelineItem | null } | null> {
  return attempt.deps.isolation.withTargetFiles(targetDir, [reportPath], 1, async (files) => {
    const file = files[0];
    // What the job wrote is the tenant's: a "report" past any real one's size is not read.
    if (file === undefined || file.bytes > MAX_TIMINGS_REPORT_BYTES) return null;
    const bytes = await file.read();
    // A lineage's target dir keeps the last job's report: one cargo did not write this time is not this attempt's.
    const started = /<td>Build start:<\/td><td>([^<]+)<\/td>/.exec(bytes.toString("utf8"))?.[1];
    if (started === undefined || Date.parse(started) < cargoStarted.getTime() - 1000) return null;
    const stored = await attempt.deps.protocol.putBlob(bytes);
    return {
      artifact: { path: file.path, bytes: stored.bytes, sha256: stored.sha256, executable: false },
      timeline: summariseCargoTimings(bytes.toString("utf8"), file.path),
    };
  });
}
