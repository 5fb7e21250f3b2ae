/**
 * How often canaries are due and when one is late. Every reader of canaries (the loop that
 * submits them, workload health that judges them) takes the same settings from AppDeps.
 */
export interface CanarySettings {
  /** A canary is due on every serving host once per interval (KILN_CANARY_INTERVAL_SECONDS). */
  readonly intervalSeconds: number;
  /** A canary not finished this long after it was due is late (default: one interval). */
  readonly lateAfterSeconds: number;
  /**
   * The deployment runs no canaries (KILN_CANARY_INTERVAL_SECONDS=0): workload health says it is
   * not measured rather than judging canaries nobody submits as pending or late.
   */
  readonly off?: boolean;
}

export const DEFAULT_CANARY_INTERVAL_SECONDS = 300;

export function canarySettings(given: Partial<CanarySettings> = {}): CanarySettings {
  const intervalSeconds = given.intervalSeconds ?? DEFAULT_CANARY_INTERVAL_SECONDS;
  return {
    intervalSeconds,
    lateAfterSeconds: given.lateAfterSeconds ?? intervalSeconds,
    ...(given.off === true ? { off: true } : {}),
  };
}

/** The start of the canary slot `now` falls in: canaries are due at multiples of the interval. */
export function canarySlotOf(now: Date, settings: CanarySettings): Date {
  const ms = settings.intervalSeconds * 1000;
  return new Date(Math.floor(now.getTime() / ms) * ms);
}
