/**
 * A small seeded pseudo-random generator (mulberry32) for trials that choose at random: the seed
 * is printed with the figure, so a failing run is reproduced by running it again with that seed.
 * Not for secrets — kiln mints those with node:crypto.
 */
export class SeededRandom {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(0, items.length - 1)] as T;
  }
}

/** The seed from `KILN_<TRIAL>_SEED` (e.g. KILN_T8_SEED), else the trial's fixed default. */
export function trialSeed(trial: string, fallback: number): number {
  const given = process.env[`KILN_${trial}_SEED`];
  return given === undefined || given === "" ? fallback : Number(given);
}
