import type { ConfigurationAnswer, RepositoryCargoConfiguration } from "./repository-cargo-configuration.js";

/**
 * One injected build setting as admitted with a job (evidence `injections`): the cargo setting,
 * its value, where the value comes from, whether it is applied, why — and, when applied, the
 * environment variable the host sets for cargo. The decision is made once, at admission, and
 * snapshotted on the job; its attempts all run with the same.
 */
export interface InjectionDecision {
  readonly setting: string;
  readonly value: string;
  readonly origin: "platform default";
  readonly status: "applied" | "not applied";
  readonly detail: string;
  readonly environment: { readonly name: string; readonly value: string } | null;
}

/** The platform's set, each chosen by measurement (docs/build-settings.md). */
interface PlatformInjection {
  readonly setting: string;
  readonly environmentName: string;
  readonly value: (job: InjectionContext) => string;
  /** The value as repositories.settings.get shows it, before a job gives it a size. */
  readonly settingsValue: string;
  /** Why it is injected, in the evidence's detail. */
  readonly why: (job: InjectionContext) => string;
  /** When it does not concern this job at all (e.g. a dev setting for a release build). */
  readonly irrelevant?: (job: InjectionContext) => string | null;
  /** Keys of the repository's configuration that, when set, leave the injection alone. */
  readonly ownKeys: (job: InjectionContext) => readonly string[];
  /** Invocation arguments that set the same thing. */
  readonly ownArguments?: RegExp;
}

export interface InjectionContext {
  readonly size: string;
  readonly vcpus: number;
  readonly operation: string;
  /** The profile the job class names (`dev`, `release`, or a custom profile). */
  readonly profile: string;
  readonly arguments: readonly string[];
  readonly environment: Readonly<Record<string, string>>;
}

export const PLATFORM_INJECTIONS: readonly PlatformInjection[] = [
  {
    setting: "build.jobs",
    environmentName: "CARGO_BUILD_JOBS",
    value: (job) => String(job.vcpus),
    settingsValue: "the vCPUs of the job's size",
    why: (job) =>
      `one rustc per vCPU of ${job.size}: cargo would otherwise count the host's CPUs and oversubscribe the machine's ${job.vcpus}`,
    ownKeys: () => ["build.jobs"],
    ownArguments: /^(-j|--jobs)(=|$)|^-j\d+$/,
  },
  {
    setting: "profile.dev.debug",
    environmentName: "CARGO_PROFILE_DEV_DEBUG",
    value: () => "line-tables-only",
    settingsValue: "line-tables-only",
    why: () =>
      "line tables keep file:line in backtraces and panics but drop variable and type debug info: measured, a dev build's target dir is 8–25 % smaller at the same wall time (docs/build-settings.md), so warm lineages hold less against the storage quota",
    irrelevant: (job) =>
      job.operation === "bench"
        ? "cargo bench builds the bench profile, which inherits from release, not dev"
        : job.profile === "dev"
          ? null
          : `the job builds the \`${job.profile}\` profile, which does not inherit from dev`,
    // `cargo test` and `cargo bench`-free test builds use the test profile, which inherits dev's
    // debug unless the repository sets its own.
    ownKeys: (job) => (job.operation === "test" ? ["profile.dev.debug", "profile.test.debug"] : ["profile.dev.debug"]),
  },
];

/**
 * Decides every platform injection for one job. A setting the repository already makes — in its
 * Cargo configuration or manifests, in the invocation's explicit environment or arguments — is
 * `not applied` and never replaced; `total_injection_opt_out` leaves every one not applied.
 */
export function decideInjections(
  job: InjectionContext,
  configuration: RepositoryCargoConfiguration,
  optOut: { readonly enabled: boolean; readonly origin: string },
): InjectionDecision[] {
  return PLATFORM_INJECTIONS.map((injection) => {
    const value = injection.value(job);
    const notApplied = (detail: string): InjectionDecision => ({
      setting: injection.setting,
      value,
      origin: "platform default",
      status: "not applied",
      detail,
      environment: null,
    });
    if (optOut.enabled) {
      return notApplied(`total_injection_opt_out is set (${optOut.origin}): kiln injects no build settings`);
    }
    const irrelevant = injection.irrelevant?.(job) ?? null;
    if (irrelevant !== null) return notApplied(irrelevant);
    if (job.environment[injection.environmentName] !== undefined) {
      return notApplied(`the invocation's environment sets ${injection.environmentName}; it is never replaced`);
    }
    const argument =
      injection.ownArguments === undefined ? undefined : job.arguments.find((a) => injection.ownArguments?.test(a));
    if (argument !== undefined)
      return notApplied(`the invocation's argument ${argument} sets it; it is never replaced`);
    for (const key of injection.ownKeys(job)) {
      const answer: ConfigurationAnswer = configuration.sets(key);
      if ("unreadable" in answer)
        return notApplied(`${answer.unreadable}; kiln cannot tell whether it sets ${key}, so it leaves it alone`);
      if (answer.set) return notApplied(`the repository's ${answer.where} sets ${key}; it is never replaced`);
    }
    return {
      setting: injection.setting,
      value,
      origin: "platform default",
      status: "applied",
      detail: `${injection.why(job)}; set as ${injection.environmentName}=${value}`,
      environment: { name: injection.environmentName, value },
    };
  });
}
