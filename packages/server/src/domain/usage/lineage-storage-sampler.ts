import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import { type Storage, sampleLineageStorage } from "@kiln/storage";

/**
 * Samples the bytes every tenant's live lineages hold, per repository, once per UTC hour: the
 * history usage reports lineage storage byte-hours from (usage-ledger.ts). Lineages keep only
 * their current bytes, so without these samples storage over time is not derivable. It runs every
 * `everyMs` (default 5 minutes) so each hour is sampled even if a pass fails or a process starts
 * late in the hour; the first sample of an hour stands (sampleLineageStorage keeps it), so any
 * number of server processes may run it. An hour no process sampled is not counted: storage is
 * under-charged, never twice. A failed pass is logged and emitted; the next pass tries again.
 */
export function startLineageStorageSampler(
  deps: { storage: Storage; clock: Clock; log: Logger; onFailure?: (failure: LoopFailure) => void },
  everyMs = 5 * 60 * 1000,
): PeriodicLoop {
  return startPeriodicLoop({
    name: "lineage storage sampler",
    clock: deps.clock,
    everyMs,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: async () => {
      await sampleLineageStorage(deps.storage, { now: deps.clock.now() });
    },
  });
}
