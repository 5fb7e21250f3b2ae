import type { CacheItem } from "@kiln/contract";
import { type AdvisoryKind, type Finding, plural } from "./advisory-basis.js";

export const LINEAGE_ALWAYS_COLD = "lineage-always-cold";

/**
 * A lineage cold in every one of at least this many of its recent jobs misses every time. The
 * first job of a class is always cold, and one more cold start (a purge, a concurrent job) is
 * ordinary; three in a row with no warm one between them is a pattern.
 */
export const ALWAYS_COLD_MIN_JOBS = 3;

/** The host's reason for the first job of a class (lineage-store.ts): expected, never the cause. */
const FIRST_JOB = "first job of the class";

/** What to do about the reason the lineage misses, as lineage-store.ts and the control plane name it. */
function remedyFor(reason: string): string {
  if (reason === "purged") {
    return "It was purged before its jobs: every purge makes the next job start cold, so stop purging it (or purge only when its state is really wrong).";
  }
  if (reason === "evicted") {
    return "The tenant's storage quota evicts it between its jobs (least recently used first): raise the storage quota or purge lineages that are no longer used.";
  }
  if (reason === "lineage in use") {
    return "Jobs of this class overlap: while one holds the lineage, the others start cold. Submit them one after another, or give concurrent work another job class.";
  }
  if (reason.startsWith("superseded")) {
    return "Concurrent jobs of this class overwrite each other's saves. Submit them one after another.";
  }
  return `Its state is not saved back or not restored (${reason}): jobs that are cancelled or pass the wall-clock ceiling save nothing, so let cargo run to its end.`;
}

/** A lineage that was cold in every one of its recent jobs, with the reason the host gave. */
export const lineageAlwaysCold: AdvisoryKind = (attempts) => {
  const byLineage = new Map<string, { cache: CacheItem; reasons: string[] }>();
  for (const attempt of attempts) {
    const caches: readonly CacheItem[] = attempt.report.caches ?? [];
    for (const cache of caches) {
      const seen = byLineage.get(cache.lineage) ?? { cache, reasons: [] };
      seen.reasons.push(cache.outcome === "cold" ? (cache.reason ?? "no reason given") : "");
      byLineage.set(cache.lineage, seen);
    }
  }
  const findings: Finding[] = [];
  for (const [lineage, { cache, reasons }] of byLineage) {
    if (reasons.length < ALWAYS_COLD_MIN_JOBS || reasons.some((r) => r === "")) continue;
    const counts = new Map<string, number>();
    for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
    const tally = [...counts]
      .sort(([a, x], [b, y]) => y - x || a.localeCompare(b))
      .map(([reason, n]) => `${reason} ×${n}`)
      .join(", ");
    // The cause is the most frequent reason other than the first job of the class.
    const cause = [...counts]
      .filter(([reason]) => reason !== FIRST_JOB)
      .sort(([a, x], [b, y]) => y - x || a.localeCompare(b))[0]?.[0];
    if (cause === undefined) continue;
    findings.push({
      key: LINEAGE_ALWAYS_COLD,
      measuredValue: `lineage ${lineage} (class ${cache.class}) was cold in all of its last ${plural(reasons.length, "job")}: ${tally}`,
      recommendation: `Keep lineage ${lineage} warm. ${remedyFor(cause)}`,
      basis: [lineage, cache.class, cause],
    });
  }
  return findings;
};
