/**
 * How long a queued job waits for the live host holding its lineage before any host takes it
 * cold (KILN_LINEAGE_AFFINITY_SECONDS). The ski-rental rule: waiting is worth it while it costs
 * less than the cold build would cost over the warm one, and waiting at most that saving keeps a
 * job within twice its cold time whatever the lineage host does. 45 s is regex's saving on a
 * quiet two-vCPU host (46–48 s cold, 3 s warm: docs/benchmarks.md); bench/lineage-placement.mjs
 * measures it on the machine at hand. A job that does not get its host runs cold: moving the
 * lineage through object storage is faster per missed job but is not built (docs/scale-out.md).
 */
export const DEFAULT_LINEAGE_AFFINITY_SECONDS = 45;
