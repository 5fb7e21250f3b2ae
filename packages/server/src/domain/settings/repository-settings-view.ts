import { FLAKY_POLICY_DEFAULT, FLAKY_RETRIES_DEFAULT, type RepositorySettings } from "@kiln/contract";
import type { StoredRepositorySettings } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { PLATFORM_WALL_CLOCK_SECONDS } from "../policy/platform-limits.js";
import { PLATFORM_INJECTIONS } from "./injected-build-settings.js";

/** The least wall-clock ceiling a repository may set: below it cargo rarely finishes a cold build. */
export const MINIMUM_WALL_CLOCK_CEILING_SECONDS = 60;

/**
 * When a settings change takes effect on this runtime. Every repository setting is applied
 * (affected_tests included), so none is named as recorded-but-not-applied.
 */
export const EFFECTIVE =
  "next admitted job: admission snapshots these settings for each job; jobs already admitted keep theirs; every setting is applied by this runtime";

/**
 * The platform's wall-clock bounds: its default (also the most a repository may set; a
 * deployment may lower it with `wallClockSeconds`) and the least a repository may set.
 */
export function wallClockBounds(platformOverride: number | undefined): { minimum: number; platformDefault: number } {
  const platformDefault = Math.min(platformOverride ?? PLATFORM_WALL_CLOCK_SECONDS, PLATFORM_WALL_CLOCK_SECONDS);
  return { minimum: Math.min(MINIMUM_WALL_CLOCK_CEILING_SECONDS, platformDefault), platformDefault };
}

const origin = (written: unknown) =>
  written === null ? ("platform default" as const) : ("dashboard repository setting" as const);

/** The RepositorySettings record of one repository. */
export function repositorySettingsView(
  stored: StoredRepositorySettings,
  platformWallClock: number | undefined,
): Static<typeof RepositorySettings> {
  const bounds = wallClockBounds(platformWallClock);
  const optOut = stored.totalInjectionOptOut ?? false;
  const ceiling = Math.min(stored.wallClockCeilingSeconds ?? bounds.platformDefault, bounds.platformDefault);
  return {
    repository: stored.repository,
    version: stored.version,
    affected_tests: stored.affectedTests ?? false,
    total_injection_opt_out: optOut,
    total_injection_opt_out_origin: origin(stored.totalInjectionOptOut),
    changed_by: stored.changedBy,
    changed_at: stored.changedAt,
    // RepositorySettings is a closed spec record: the kiln extension settings are said here.
    effective: `${EFFECTIVE}; kiln extensions: flaky_retries ${stored.flakyRetries ?? FLAKY_RETRIES_DEFAULT} (${origin(stored.flakyRetries)}), flaky_policy ${stored.flakyPolicy ?? FLAKY_POLICY_DEFAULT} (${origin(stored.flakyPolicy)})`,
    injected: PLATFORM_INJECTIONS.map((injection) => ({
      name: injection.setting,
      value: injection.settingsValue,
      origin: "platform default" as const,
      status: optOut ? ("not applied" as const) : ("applied" as const),
      detail: optOut
        ? "total_injection_opt_out is set: no build setting is injected"
        : `injected as ${injection.environmentName} unless the job's own Cargo configuration, environment or arguments set it (then reported not applied, never replaced)`,
    })),
    wall_clock_ceiling: {
      name: "wall_clock_ceiling_seconds",
      value: ceiling,
      origin: origin(stored.wallClockCeilingSeconds),
      status: "applied" as const,
      detail:
        "the ceiling a job carries unless its source pins one ([workspace.metadata.kiln] or [package.metadata.kiln] wall_clock_ceiling_seconds in its Cargo.toml)",
    },
    wall_clock_ceiling_seconds: ceiling,
    wall_clock_ceiling_origin: origin(stored.wallClockCeilingSeconds),
    minimum_wall_clock_ceiling_seconds: bounds.minimum,
    platform_default_wall_clock_ceiling_seconds: bounds.platformDefault,
  };
}
