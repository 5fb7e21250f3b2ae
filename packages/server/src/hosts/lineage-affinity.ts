/**
 * How long a queued job waits for the live host holding its lineage before any host takes it
 * cold (KILN_LINEAGE_AFFINITY_SECONDS). Chosen from bench/lineage-placement.mjs (docs/benchmarks.md):
 * moving a lineage through object storage was no faster than building cold, so a job either
 * waits for its host or runs cold; waiting is worth it while it costs less than the cold build
 * saves, and bounding the wait at that saving (cold − warm, about 45 s for regex's test target
 * here) keeps the worst case within twice the cold build (the ski-rental bound).
 */
export const DEFAULT_LINEAGE_AFFINITY_SECONDS = 45;
