import { FLAKY_POLICY_DEFAULT, FLAKY_RETRIES_DEFAULT, type FlakyPolicy } from "@kiln/contract";
import { type Db, readRepositorySettings } from "@kiln/storage";
import { VCPUS_OF_SIZE } from "../policy/platform-limits.js";
import { refuse } from "../refusal.js";
import { decideInjections, type InjectionDecision } from "../settings/injected-build-settings.js";
import { RepositoryCargoConfiguration } from "../settings/repository-cargo-configuration.js";
import { wallClockBounds } from "../settings/repository-settings-view.js";
import { profileOf } from "./admit-inline-source.js";
import type { TomlReader } from "./toml-document.js";

/** What admission snapshots on a job from its repository's settings and its own source. */
export interface AdmittedSettings {
  readonly settings_version: number;
  readonly injections: readonly InjectionDecision[];
  readonly wall_clock_ceiling: { readonly seconds: number; readonly origin: string };
  readonly affected_tests: boolean;
  readonly lineage_seeding: boolean;
  /** Issue 37: re-runs of a failed test in a test job, and what a test that then passed does to the verdict. */
  readonly flaky_retries: number;
  readonly flaky_policy: FlakyPolicy;
}

/** Where a captured source pins its own ceiling (first found wins). */
const PINNED_CEILING_KEYS = [
  "package.metadata.kiln.wall_clock_ceiling_seconds",
  "workspace.metadata.kiln.wall_clock_ceiling_seconds",
];

/**
 * Snapshots the repository's settings for one job (spec, Repositories rules: "Admission
 * snapshots the settings for each submitted job"): the injected build settings decided
 * against the source's own Cargo configuration, the wall-clock ceiling (the source's pin,
 * else the repository setting, else the platform default) and affected_tests. A later
 * settings write changes the next admitted job, never this one.
 */
export async function admitSettings(
  db: Db,
  input: {
    tenantId: string;
    repository: string;
    size: string;
    /** The tenant's default ceiling (tenant.settings), for a repository that sets none. */
    tenantWallClockCeilingSeconds?: number | null;
    /** The platform ceiling as the deployment lowers it (`wallClockSeconds`; undefined: the platform default). */
    platformWallClockSeconds: number | undefined;
    invocation: { operation: string; arguments: readonly string[]; environment?: Readonly<Record<string, string>> };
    workingDirectory: string;
    /** The source's TOML files (jobs/admission-source.ts: bounded, parsed off the event loop). */
    toml: TomlReader;
  },
): Promise<AdmittedSettings> {
  const stored = await readRepositorySettings(db, { tenantId: input.tenantId, repository: input.repository });
  const configuration = await RepositoryCargoConfiguration.read(input.toml, input.workingDirectory);
  const optOut = stored?.totalInjectionOptOut ?? false;
  const injections = decideInjections(
    {
      size: input.size,
      vcpus: VCPUS_OF_SIZE[input.size] ?? 2,
      operation: input.invocation.operation,
      profile: profileOf(input.invocation.arguments),
      arguments: input.invocation.arguments,
      environment: input.invocation.environment ?? {},
    },
    configuration,
    {
      enabled: optOut,
      origin: stored?.totalInjectionOptOut == null ? "platform default" : "dashboard repository setting",
    },
  );
  const bounds = wallClockBounds(input.platformWallClockSeconds);
  const tenantCeiling = input.tenantWallClockCeilingSeconds ?? null;
  let wallClock = {
    seconds: Math.min(
      stored?.wallClockCeilingSeconds ?? tenantCeiling ?? bounds.platformDefault,
      bounds.platformDefault,
    ),
    origin:
      stored?.wallClockCeilingSeconds != null
        ? "dashboard repository setting"
        : tenantCeiling !== null
          ? "tenant setting"
          : "platform default",
  };
  for (const key of PINNED_CEILING_KEYS) {
    const pinned = configuration.manifestValue(key);
    if (pinned === undefined) continue;
    const seconds = pinned.value;
    if (
      typeof seconds !== "number" ||
      !Number.isInteger(seconds) ||
      seconds < bounds.minimum ||
      seconds > bounds.platformDefault
    ) {
      refuse(
        "invalid_request",
        `${pinned.where} [${key.split(".").slice(0, -1).join(".")}] wall_clock_ceiling_seconds must be an integer between ${bounds.minimum} and ${bounds.platformDefault}`,
      );
    }
    wallClock = { seconds, origin: "repository configuration" };
    break;
  }
  return {
    settings_version: stored?.version ?? 0,
    injections,
    wall_clock_ceiling: wallClock,
    affected_tests: stored?.affectedTests ?? false,
    lineage_seeding: stored?.lineageSeeding ?? true,
    flaky_retries: stored?.flakyRetries ?? FLAKY_RETRIES_DEFAULT,
    flaky_policy: stored?.flakyPolicy ?? FLAKY_POLICY_DEFAULT,
  };
}
