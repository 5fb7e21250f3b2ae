import {
  appendAuditEntry,
  type LineageRow,
  listRepositoryStorage,
  purgeLineage,
  readRepositoryStorage,
} from "@kiln/storage";
import { refuse } from "../http/refusal.js";
import { storageQuotaBytes } from "../repositories/storage-quota.js";
import { type Handler, type HandlerContext, principalOf } from "./handler.js";
import { pageRequestOf } from "./page-request.js";

/** What a purge does, as its receipt says. */
export const PURGE_CONSEQUENCE = "the next matching job starts cold";

const repositoryOf = (ctx: HandlerContext) => `${String(ctx.params.owner)}/${String(ctx.params.name)}`;

const lineageView = (row: LineageRow) => ({
  repository: row.repository,
  class: row.class,
  lineage: row.lineage,
  bytes: row.bytes,
  last_used_at: row.last_used_at,
});

/**
 * repositories.list: the tenant's onboarded repositories (keyset by name) with the bytes
 * their live lineages hold, those lineages, the tenant's total and its storage quota.
 * Advisories arrive with the advisories slice.
 */
export const listRepositories: Handler = async (ctx) => {
  const principal = principalOf(ctx);
  const page = await listRepositoryStorage(ctx.db, { tenantId: principal.tenantId, ...pageRequestOf(ctx.query) });
  return {
    repositories: page.repositories.map((r) => ({ repository: r.repository, total_bytes: r.totalBytes })),
    lineages: page.lineages.map(lineageView),
    total_bytes: page.tenantBytes,
    storage_quota_bytes: storageQuotaBytes(ctx.deps.storageQuotaBytes),
    advisories: [],
    next_cursor: page.nextCursor,
  };
};

/** repositories.get: one onboarded repository's live lineages and bytes; not_found otherwise. */
export const getRepository: Handler = async (ctx) => {
  const repository = repositoryOf(ctx);
  const storage = await readRepositoryStorage(ctx.db, { tenantId: principalOf(ctx).tenantId, repository });
  if (storage === undefined) return refuse("not_found", `repository ${repository} is not onboarded for this tenant`);
  return {
    repository,
    lineages: storage.lineages.map(lineageView),
    total_bytes: storage.totalBytes,
    storage_quota_bytes: storageQuotaBytes(ctx.deps.storageQuotaBytes),
    advisories: [],
  };
};

/**
 * repositories.lineages.purge: the consequence (the next matching job starts cold) requires
 * `confirm` to repeat the lineage's identity. The lineage stops counting against the quota at
 * once; the host drops its state at the next placement of the class. Audited.
 */
export const purgeRepositoryLineage: Handler = async (ctx) => {
  const principal = principalOf(ctx);
  const repository = repositoryOf(ctx);
  const body = ctx.body as { lineage: string; confirm: string };
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
    ctx.clock,
  );
  return { lineage: body.lineage, consequence: PURGE_CONSEQUENCE, purged_by: principal.principal };
};
