import {
  type AdvisoryKind,
  type BasisAttempt,
  cargoPhaseOf,
  type Finding,
  median,
  percent,
  plural,
  seconds,
} from "./advisory-basis.js";

export const CRITICAL_PATH_CRATE = "critical-path-crate";

/**
 * A crate whose own compilation takes at least this share of the cargo phase's wall time
 * dominates the critical path: the phase cannot end before that crate does, whatever the
 * vCPUs, and past half of it the rest of the build mostly waits on it.
 */
export const DOMINANT_SHARE = 0.5;
/** Below this a dominant crate is not worth restructuring: splitting it saves less than run-to-run noise. */
export const DOMINANT_MIN_SECONDS = 3;
/** A job that compiled fewer crates has no parallel work to speak of (nothing for the crate to dominate). */
export const DOMINANT_MIN_COMPILED = 2;

interface Measured {
  readonly crate: string;
  readonly phase: string;
  readonly crateMs: number;
  readonly phaseMs: number;
}

/** The longest compiled crate of an attempt that compiled enough crates, against its cargo phase. */
function longestCrate(attempt: BasisAttempt): Measured | null {
  const phase = cargoPhaseOf(attempt);
  if (phase === undefined || phase.duration_ms === null || phase.duration_ms <= 0) return null;
  const compiled = (Array.isArray(attempt.report.crates) ? attempt.report.crates : []).filter(
    (c) => c.outcome === "compiled" && typeof c.duration_ms === "number",
  );
  if (compiled.length < DOMINANT_MIN_COMPILED) return null;
  const top = compiled.reduce((a, b) => ((b.duration_ms ?? 0) > (a.duration_ms ?? 0) ? b : a));
  return { crate: top.name, phase: phase.name, crateMs: top.duration_ms ?? 0, phaseMs: phase.duration_ms };
}

/**
 * One crate dominating the critical path: the longest compiled crate takes at least
 * DOMINANT_SHARE of the cargo phase in most of the recent jobs that compiled several crates.
 * A crate's time is cargo's (its `Compiling` line to its last artifact, see the host's
 * evidence/build-units.ts); no saving is predicted, since it depends on how the crate splits.
 */
export const criticalPathCrate: AdvisoryKind = (attempts) => {
  const measured = attempts.map(longestCrate).filter((m): m is Measured => m !== null);
  if (measured.length === 0) return [];
  const byCrate = new Map<string, Measured[]>();
  for (const m of measured) {
    if (m.crateMs / m.phaseMs < DOMINANT_SHARE) continue;
    byCrate.set(`${m.crate}\u0000${m.phase}`, [...(byCrate.get(`${m.crate}\u0000${m.phase}`) ?? []), m]);
  }
  const findings: Finding[] = [];
  for (const dominant of byCrate.values()) {
    // Most of the jobs that compiled several crates, not one slow outlier.
    if (dominant.length * 2 <= measured.length) continue;
    const crateMs = median(dominant.map((m) => m.crateMs));
    if (crateMs < DOMINANT_MIN_SECONDS * 1000) continue;
    const share = median(dominant.map((m) => m.crateMs / m.phaseMs));
    const first = dominant[0];
    if (first === undefined) continue;
    findings.push({
      key: CRITICAL_PATH_CRATE,
      measuredValue:
        `crate ${first.crate} compiled in ${seconds(crateMs)}, ${percent(share)} of the ${first.phase} phase ` +
        `(${seconds(median(dominant.map((m) => m.phaseMs)))}) (medians over ${plural(dominant.length, "job")} of ` +
        `${measured.length} that compiled several crates)`,
      recommendation:
        `Split ${first.crate} into crates that can compile in parallel (or cut its generic instantiation and macro ` +
        `expansion): the ${first.phase} phase cannot take less than this one crate, and a larger size does not ` +
        `shorten it. No saving is predicted: it depends on how the crate splits.`,
      basis: [first.crate, first.phase, Math.floor(share * 10) / 10],
    });
  }
  return findings;
};
