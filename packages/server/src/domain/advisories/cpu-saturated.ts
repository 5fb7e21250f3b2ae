import { SIZE_SHAPES } from "../policy/platform-limits.js";
import {
  type AdvisoryKind,
  type BasisAttempt,
  cargoPhaseOf,
  type Finding,
  percent,
  plural,
  seconds,
} from "./advisory-basis.js";

export const CPU_SATURATED = "cpu-saturated";

/**
 * Mean utilisation (cgroup CPU seconds ÷ (wall seconds × vCPUs)) at or above which the cargo
 * phase counts as saturating its vCPUs. cargo's own serial steps (resolution, fingerprinting,
 * the final link, test binaries that run one by one) keep even a CPU-bound build below 100 %;
 * 85 % means the vCPUs were busy for nearly all of the phase, so more of them would be used.
 */
export const SATURATED_UTILISATION = 0.85;
/** Fewer jobs than this at one size and phase are too few to call a pattern. */
export const SATURATED_MIN_JOBS = 2;
/**
 * Phases shorter than this are left out: sandbox start and cargo's fixed overhead dominate
 * them, and a larger size could save only seconds.
 */
export const SATURATED_MIN_WALL_SECONDS = 20;

interface Sample {
  readonly cpuSeconds: number;
  readonly wallSeconds: number;
  readonly vcpus: number;
}

function sampleOf(attempt: BasisAttempt): Sample | null {
  const unit = attempt.report.unit;
  const phase = cargoPhaseOf(attempt);
  if (unit === null || unit === undefined || phase === undefined) return null;
  if (phase.status !== "passed" && phase.status !== "failed") return null;
  const cpuSeconds = unit.cpu_seconds;
  if (typeof cpuSeconds !== "number" || !Number.isFinite(cpuSeconds) || cpuSeconds < 0) return null;
  // The cgroup's CPU time covers the isolated unit, so its own start and finish are the wall.
  const wallMs =
    unit.started_at !== null && unit.finished_at !== null
      ? Date.parse(unit.finished_at) - Date.parse(unit.started_at)
      : (phase.duration_ms ?? Number.NaN);
  if (!Number.isFinite(wallMs) || wallMs < SATURATED_MIN_WALL_SECONDS * 1000 || unit.vcpus < 1) return null;
  return { cpuSeconds, wallSeconds: wallMs / 1000, vcpus: unit.vcpus };
}

/**
 * The model of the predicted time at `toVcpus`: during the phase, either all vCPUs were busy
 * (parallel time p) or one was (serial time s), so wall = s + p and CPU = s + p·n, giving
 * p = (CPU − wall) ÷ (n − 1). At the larger size the parallel time scales by n ÷ n' and the
 * serial time does not (Amdahl). With one vCPU the two cannot be told apart and all busy time
 * counts as parallel (an optimistic bound).
 */
export function predictedWallSeconds(sample: Sample, toVcpus: number): number {
  const { cpuSeconds, wallSeconds, vcpus } = sample;
  const parallel =
    vcpus > 1
      ? Math.min(wallSeconds, Math.max(0, (cpuSeconds - wallSeconds) / (vcpus - 1)))
      : Math.min(wallSeconds, cpuSeconds);
  return wallSeconds - parallel + (parallel * vcpus) / toVcpus;
}

/** The next size up, by vCPUs; undefined at the largest. */
function nextSize(size: string): { size: string; vcpus: number } | undefined {
  const vcpus = SIZE_SHAPES[size]?.vcpus;
  if (vcpus === undefined) return undefined;
  return Object.entries(SIZE_SHAPES)
    .filter(([, shape]) => shape.vcpus > vcpus)
    .sort(([, a], [, b]) => a.vcpus - b.vcpus)
    .map(([name, shape]) => ({ size: name, vcpus: shape.vcpus }))[0];
}

/**
 * A cargo phase (build or test) that keeps its vCPUs saturated, per size and phase: the next size
 * with the predicted phase time under the model above.
 */
export const cpuSaturated: AdvisoryKind = (attempts) => {
  const groups = new Map<string, { size: string; phase: string; samples: Sample[] }>();
  for (const attempt of attempts) {
    const sample = sampleOf(attempt);
    const phase = cargoPhaseOf(attempt)?.name;
    if (sample === null || phase === undefined) continue;
    const key = `${attempt.size}\u0000${phase}`;
    const group = groups.get(key) ?? { size: attempt.size, phase, samples: [] };
    group.samples.push(sample);
    groups.set(key, group);
  }
  const findings: Finding[] = [];
  for (const { size, phase, samples } of groups.values()) {
    if (samples.length < SATURATED_MIN_JOBS) continue;
    const cpu = samples.reduce((sum, s) => sum + s.cpuSeconds, 0);
    const capacity = samples.reduce((sum, s) => sum + s.wallSeconds * s.vcpus, 0);
    const utilisation = cpu / capacity;
    if (utilisation < SATURATED_UTILISATION) continue;
    const next = nextSize(size);
    if (next === undefined) continue;
    const vcpus = samples[0]?.vcpus ?? 1;
    const wall = samples.reduce((sum, s) => sum + s.wallSeconds, 0) / samples.length;
    const predicted = samples.reduce((sum, s) => sum + predictedWallSeconds(s, next.vcpus), 0) / samples.length;
    const saving = wall - predicted;
    findings.push({
      key: CPU_SATURATED,
      measuredValue:
        `${phase} phase used ${((cpu / capacity) * vcpus).toFixed(2)} of ${vcpus} vCPUs (${percent(utilisation)}) ` +
        `over ${plural(samples.length, "job")} on ${size}, mean wall ${seconds(wall * 1000)} ` +
        `(CPU seconds from the unit's cgroup ÷ (wall seconds × vCPUs))`,
      recommendation:
        `Use ${next.size} (${next.vcpus} vCPUs): predicted ${phase} phase ${seconds(predicted * 1000)} instead of ` +
        `${seconds(wall * 1000)} (saves ${seconds(saving * 1000)}, ${percent(saving / wall)}), assuming the time all ` +
        `${vcpus} vCPUs were busy scales with the vCPUs and the rest does not.`,
      basis: [size, phase, next.size, Math.floor(utilisation * 20) / 20],
    });
  }
  return findings;
};
