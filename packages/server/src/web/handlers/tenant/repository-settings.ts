import { REPOSITORY_WRITABLE_SETTINGS } from "@kiln/contract";
import { appendAuditEntry, readRepositorySettings, writeRepositorySettings } from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import { notOnboardedDetail } from "../../../domain/repositories/onboard-repository.js";
import { repositoryOfPath } from "../../../domain/repositories/require-onboarded.js";
import {
  EFFECTIVE,
  repositorySettingsView,
  wallClockBounds,
} from "../../../domain/settings/repository-settings-view.js";
import { type Handler, principalOf } from "../../http/handler.js";

/** repositories.settings.get: a plain read, no lifecycle effect. */
export const getRepositorySettings: Handler<"repositories.settings.get"> = async (ctx) => {
  const repository = repositoryOfPath(ctx.params);
  const stored = await readRepositorySettings(ctx.db, { tenantId: principalOf(ctx).tenantId, repository });
  if (stored === undefined) return refuse("not_found", notOnboardedDetail(repository));
  return repositorySettingsView(stored, ctx.deps.wallClockSeconds);
};

/**
 * repositories.settings.write: all-or-nothing, by compare-and-set on the version the caller
 * read (a moved-past version is `stale_version` naming the current one). Takes effect at the
 * next admission; audited.
 */
export const writeRepositorySettingsHandler: Handler<"repositories.settings.write"> = async (ctx) => {
  const principal = principalOf(ctx);
  const repository = repositoryOfPath(ctx.params);
  const body = ctx.body;
  const writable = new Set<string>(REPOSITORY_WRITABLE_SETTINGS);
  for (const name of Object.keys(body.changes)) {
    if (!writable.has(name)) {
      refuse(
        "invalid_request",
        `body.changes.${name} is not a repository setting; repositories.settings.write accepts ${REPOSITORY_WRITABLE_SETTINGS.join(", ")}`,
      );
    }
  }
  const ceiling = body.changes.wall_clock_ceiling_seconds as number | undefined;
  const bounds = wallClockBounds(ctx.deps.wallClockSeconds);
  if (ceiling !== undefined && (ceiling < bounds.minimum || ceiling > bounds.platformDefault)) {
    refuse(
      "invalid_request",
      `body.changes.wall_clock_ceiling_seconds must be between ${bounds.minimum} and ${bounds.platformDefault} (the platform default is also the maximum)`,
    );
  }
  // Their ranges (0..5, pass|fail) are the SettingWrite schema's: the router refuses others.
  const retries = body.changes.flaky_retries;
  const policy = body.changes.flaky_policy;
  const result = await writeRepositorySettings(ctx.db, {
    tenantId: principal.tenantId,
    repository,
    expectedVersion: body.version,
    changes: {
      ...(typeof body.changes.affected_tests === "boolean" ? { affectedTests: body.changes.affected_tests } : {}),
      ...(typeof body.changes.total_injection_opt_out === "boolean"
        ? { totalInjectionOptOut: body.changes.total_injection_opt_out }
        : {}),
      ...(ceiling === undefined ? {} : { wallClockCeilingSeconds: ceiling }),
      ...(typeof body.changes.lineage_seeding === "boolean" ? { lineageSeeding: body.changes.lineage_seeding } : {}),
      ...(retries === undefined ? {} : { flakyRetries: retries }),
      ...(policy === undefined ? {} : { flakyPolicy: policy }),
    },
    changedBy: principal.principal,
    now: ctx.now,
  });
  if (result.kind === "not_found") {
    // The operation's refusals (spec) are invalid_request and stale_version: the path names
    // a repository this tenant has not onboarded, so the request's repository is invalid.
    return refuse("invalid_request", `path ${notOnboardedDetail(repository)}`);
  }
  if (result.kind === "stale") {
    return refuse(
      "stale_version",
      `body.version ${body.version} is not the current settings version of ${repository}; re-read the settings (version ${result.currentVersion}) and write again`,
      { current_version: result.currentVersion },
    );
  }
  await appendAuditEntry(
    ctx.db,
    {
      tenantId: principal.tenantId,
      actor: principal.principal,
      target: `repository-settings:${repository}`,
      value: `version ${result.version}: ${JSON.stringify(body.changes)}`,
      effective: "next admitted job",
    },
    ctx.clock.now(),
  );
  return {
    target: `repository:${repository}`,
    version: result.version,
    changed_by: principal.principal,
    changed_at: result.changedAt,
    effective: EFFECTIVE,
    // Every repository setting is applied by this runtime (repository-settings-view.ts).
    not_applied: [],
  };
};
