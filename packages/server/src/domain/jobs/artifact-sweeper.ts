import {
  type Clock,
  type Logger,
  type LoopFailure,
  messageOf,
  type PeriodicLoop,
  startPeriodicLoop,
} from "@kiln/contract";
import { type ArtifactBlobSweep, type BlobStore, type Storage, sweepArtifactBlobs } from "@kiln/storage";

/** Digests one storage call sweeps; a pass calls again while a call comes back full. */
const DIGESTS_PER_CALL = 200;

/** What a pass did, for the operator log and for tests. */
export type ArtifactSweepPass = Omit<ArtifactBlobSweep, "examined" | "failures"> & {
  readonly failures: number;
};

/**
 * Deletes the bytes of expired artifacts every `everyMs` on the clock (KILN_RETENTION_SWEEP_SECONDS):
 * a digest no unexpired artifact serves, nothing named within the grace period, and no other
 * kind of record (a job's source, a source part, Cargo output) names. Any number of kiln-servers
 * on one database may run it at once: each digest is marked under its row lock before its bytes
 * go, so each blob is deleted once and a live one never (storage's sweep-artifact-blobs.ts). A
 * pass works through everything due, `DIGESTS_PER_CALL` at a time, each call at the clock's
 * current time. A digest it cannot finish (a failing store) stays marked for a later pass, and
 * the pass then fails: logged and emitted as `loop:error` naming how many and the first cause.
 */
export function startArtifactSweeper(
  deps: {
    storage: Storage;
    blobs: BlobStore;
    clock: Clock;
    log: Logger;
    /** Seconds past an artifact's expiry and a digest's last use before its bytes may go (storage's default). */
    graceSeconds?: number;
    onFailure?: (failure: LoopFailure) => void;
    onPass?: (pass: ArtifactSweepPass) => void;
  },
  everyMs: number,
): PeriodicLoop {
  return startPeriodicLoop({
    name: "artifact sweeper",
    clock: deps.clock,
    everyMs,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: async () => {
      const pass = await sweepArtifactBytes(deps);
      if (pass.deleted > 0 || pass.shared > 0) {
        deps.log.info({ ...pass }, `artifact sweeper: deleted the bytes of ${pass.deleted} expired artifact blob(s)`);
      }
    },
  });
}

/** One pass of the sweeper; throws (after sweeping what it could) when any digest failed. */
export async function sweepArtifactBytes(deps: {
  storage: Storage;
  blobs: BlobStore;
  clock: Clock;
  graceSeconds?: number;
  onPass?: (pass: ArtifactSweepPass) => void;
}): Promise<ArtifactSweepPass> {
  let deleted = 0;
  let deletedBytes = 0;
  let shared = 0;
  const failures: ArtifactBlobSweep["failures"][number][] = [];
  for (;;) {
    const call = await sweepArtifactBlobs(deps.storage, deps.blobs, {
      now: deps.clock.now(),
      limit: DIGESTS_PER_CALL,
      ...(deps.graceSeconds === undefined ? {} : { graceSeconds: deps.graceSeconds }),
    });
    deleted += call.deleted;
    deletedBytes += call.deletedBytes;
    shared += call.shared;
    failures.push(...call.failures);
    // After a failure the pass ends: the next one tries again, rather than this one in a loop.
    if (call.examined < DIGESTS_PER_CALL || call.failures.length > 0) break;
  }
  const pass = { deleted, deletedBytes, shared, failures: failures.length };
  deps.onPass?.(pass);
  const first = failures[0];
  if (first !== undefined) {
    throw new Error(
      `${failures.length} artifact blob(s) could not be swept (left marked for a later pass); first, ${first.sha256}: ${messageOf(first.error)}`,
      { cause: first.error },
    );
  }
  return pass;
}
