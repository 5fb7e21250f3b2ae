import { type BlobStore, listCanaryOutcomes, readHostCapacity, type Storage } from "@kiln/storage";
import type { CanarySettings } from "../canaries/canary-settings.js";
import { executionCapacity } from "./execution-capacity.js";
import { managementReadiness } from "./management-readiness.js";
import { type OperatingStatesDocument, operatingState } from "./operating-state.js";
import { workloadHealth } from "./workload-health.js";

/** How many of each host's newest canaries workload health reads (a few pending ones do not hide a verdict). */
const CANARIES_PER_HOST = 4;

/**
 * The four operating states, computed from measurements at `now`: the readiness probes, one
 * read of every host with what runs on it, and one read of each host's newest canaries with
 * their jobs. Four statements and an access(2): cheap enough to compute on every read, so the
 * answer is never older than the request (bench/operating-states.mjs measures it).
 */
export async function computeOperatingStates(
  deps: { storage: Storage; blobs: BlobStore; canaries: CanarySettings; version: string },
  now: Date,
): Promise<OperatingStatesDocument> {
  const since = new Date(
    now.getTime() - (2 * deps.canaries.intervalSeconds + deps.canaries.lateAfterSeconds) * 1000,
  ).toISOString();
  const [readiness, hosts, canaries] = await Promise.all([
    managementReadiness(deps, now),
    readHostCapacity(deps.storage, { now }),
    listCanaryOutcomes(deps.storage, { since, perHost: CANARIES_PER_HOST }),
  ]);
  const capacity = executionCapacity(hosts, now);
  return {
    management_liveness: operatingState("management_liveness", {
      now,
      code: "answering",
      detail: `kiln-server ${deps.version} (process ${process.pid}) answered`,
      refusingUntil: null,
    }),
    management_readiness: readiness,
    execution_capacity: capacity.state,
    end_to_end_workload_health: workloadHealth(hosts, canaries, now, deps.canaries),
    hosts: capacity.hosts,
  };
}
