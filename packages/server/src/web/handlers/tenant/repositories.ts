import { TEST_HISTORY_WINDOW } from "@kiln/contract";
import {
  appendAuditEntry,
  dismissAdvisory,
  type LineageRow,
  listRepositoryStorage,
  purgeLineage,
  readRepositoryStorage,
} from "@kiln/storage";
import { listedAdvisory, readAdvisories } from "../../../domain/advisories/compute-advisories.js";
import { refuse } from "../../../domain/refusal.js";
import { notOnboardedDetail, onboardTenantRepository } from "../../../domain/repositories/onboard-repository.js";
import { repositoryOfPath } from "../../../domain/repositories/require-onboarded.js";
import { tenantStorageQuota } from "../../../domain/repositories/storage-quota.js";
import { readTestHistory } from "../../../domain/repositories/test-history.js";
import { type Handler, principalOf } from "../../http/handler.js";
import { pageRequestOf } from "./page-request.js";

/** What a purge does, as its receipt says. */
export const PURGE_CONSEQUENCE = "the next matching job starts cold";

const lineageView = (row: LineageRow) => ({
  repository: row.repository,
  class: row.class,
  lineage: row.lineage,
  bytes: row.bytes,
  last_used_at: row.last_used_at,
});

/**
 * repositories.list: the tenant's onboarded repositories (keyset by name) with the bytes
 * their live lineages hold, those lineages, the tenant's total and its storage quota, and the
 * undismissed advisories of the repositories on the page (domain/advisories/compute-advisories.ts).
 */
export const listRepositories: Handler<"repositories.list"> = async (ctx) => {
  const principal = principalOf(ctx);
  const page = await listRepositoryStorage(ctx.db, { tenantId: principal.tenantId, ...pageRequestOf(ctx.query) });
  const names = page.repositories.map((r) => r.repository);
  const advisories = await readAdvisories(ctx.db, { tenantId: principal.tenantId, repositories: names });
  return {
    repositories: page.repositories.map((r) => ({ repository: r.repository, total_bytes: r.totalBytes })),
    lineages: page.lineages.map(lineageView),
    total_bytes: page.tenantBytes,
    storage_quota_bytes: await tenantStorageQuota(ctx, principal.tenantId),
    advisories: names.flatMap((name) => (advisories.get(name) ?? []).map((a) => listedAdvisory(name, a))),
    next_cursor: page.nextCursor,
  };
};

/**
 * repositories.get: one onboarded repository's live lineages, bytes and undismissed advisories
 * with their measured basis; not_found otherwise.
 */
export const getRepository: Handler<"repositories.get"> = async (ctx) => {
  const repository = repositoryOfPath(ctx.params);
  const tenantId = principalOf(ctx).tenantId;
  const storage = await readRepositoryStorage(ctx.db, { tenantId, repository });
  if (storage === undefined) return refuse("not_found", notOnboardedDetail(repository));
  const advisories = await readAdvisories(ctx.db, { tenantId, repositories: [repository] });
  return {
    repository,
    lineages: storage.lineages.map(lineageView),
    total_bytes: storage.totalBytes,
    storage_quota_bytes: await tenantStorageQuota(ctx, tenantId),
    advisories: advisories.get(repository) ?? [],
  };
};

/**
 * repositories.advisories.dismiss: remembers who dismissed one of the repository's current
 * advisories (an id not computed for it now is not_found: a dismissal names a measured basis,
 * and a changed basis is a new advisory that shows again). The first dismissal is kept and
 * audited; dismissing it again answers the remembered one. Keyed: a replay is the receipt.
 */
export const dismissRepositoryAdvisory: Handler<"repositories.advisories.dismiss"> = async (ctx) => {
  const principal = principalOf(ctx);
  const repository = repositoryOfPath(ctx.params);
  const advisory = ctx.params.advisory;
  const onboarded = await readRepositoryStorage(ctx.db, { tenantId: principal.tenantId, repository });
  if (onboarded === undefined) return refuse("not_found", notOnboardedDetail(repository));
  const current = await readAdvisories(ctx.db, {
    tenantId: principal.tenantId,
    repositories: [repository],
    includeDismissed: true,
  });
  const found = (current.get(repository) ?? []).find((a) => a.id === advisory);
  if (found === undefined) return refuse("not_found", `no current advisory ${advisory} of ${repository}`);
  const { dismissal, created } = await dismissAdvisory(ctx.db, {
    tenantId: principal.tenantId,
    repository,
    advisory,
    dismissedBy: principal.principal,
    now: ctx.now,
  });
  if (created) {
    await appendAuditEntry(
      ctx.db,
      {
        tenantId: principal.tenantId,
        actor: principal.principal,
        target: `advisory:${advisory}`,
        value: `dismissed (${repository}, ${found.key}, basis ${found.basis_signature})`,
        effective: dismissal.dismissedAt,
      },
      ctx.clock.now(),
    );
  }
  return { advisory, dismissed_by: dismissal.dismissedBy };
};

/**
 * repositories.lineages.purge: the consequence (the next matching job starts cold) requires
 * `confirm` to repeat the lineage's identity. The lineage stops counting against the quota at
 * once; the host drops its state at the next placement of the class. Audited.
 */
export const purgeRepositoryLineage: Handler<"repositories.lineages.purge"> = async (ctx) => {
  const principal = principalOf(ctx);
  const repository = repositoryOfPath(ctx.params);
  const body = ctx.body;
  if (body.confirm !== body.lineage) {
    refuse(
      "confirmation_required",
      `purging ${body.lineage} deletes its cached build state and ${PURGE_CONSEQUENCE}: set confirm to the lineage identity`,
    );
  }
  const result = await purgeLineage(ctx.db, {
    tenantId: principal.tenantId,
    repository,
    lineage: body.lineage,
    now: ctx.now,
  });
  if (result.kind === "not_found") return refuse("not_found", `no lineage ${body.lineage} of ${repository}`);
  await appendAuditEntry(
    ctx.db,
    {
      tenantId: principal.tenantId,
      actor: principal.principal,
      target: `lineage:${body.lineage}`,
      value: `purged (${repository}, class ${result.row.class}, ${result.row.bytes} bytes)`,
      effective: "next job",
    },
    ctx.clock.now(),
  );
  return { lineage: body.lineage, consequence: PURGE_CONSEQUENCE, purged_by: principal.principal };
};

/**
 * repositories.onboard (a kiln extension): a tenant admin onboards a repository without the
 * source-hosting app; onboarding it again answers the first onboarding. Audited.
 */
export const onboardRepositoryHandler: Handler<"repositories.onboard"> = async (ctx) => {
  const principal = principalOf(ctx);
  return onboardTenantRepository(
    ctx.db,
    { tenantId: principal.tenantId, repository: ctx.body.repository, actor: principal.principal },
    ctx.now,
  );
};

/** repositories.tests (a kiln extension): the repository's test history (domain/repositories/test-history.ts). */
export const repositoryTests: Handler<"repositories.tests"> = async (ctx) => {
  const { window, sort } = ctx.query;
  return readTestHistory(ctx.db, {
    tenantId: principalOf(ctx).tenantId,
    repository: repositoryOfPath(ctx.params),
    window: window ?? TEST_HISTORY_WINDOW.default,
    sort: sort ?? "name",
    ...pageRequestOf({ limit: ctx.query.limit ?? 50, cursor: ctx.query.cursor }),
  });
};
