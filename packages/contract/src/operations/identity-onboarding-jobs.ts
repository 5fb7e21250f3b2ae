import { Type } from "@sinclair/typebox";
import { defineOperation } from "../operation.js";
import { ClaimReceipt, ClaimRequest, Identity, Onboarding } from "../records/identity.js";
import {
  ArtifactInventory,
  CancellationReceipt,
  CargoWorkspaceRequest,
  JOB_STATUSES,
  Job,
  JobEvidence,
  JobId,
  JobLogPage,
  JobLogSearchResult,
  JobLogStreamFrame,
  JobsPage,
  RetryReceipt,
} from "../records/jobs.js";
import { A, K } from "../refusal-codes.js";
import { Cursor, PageQuery, RepositoryName } from "../schema-helpers.js";

const jobIdParam = () => Type.String({ minLength: 1, maxLength: 128, description: "Job id." });
const attemptParam = () => Type.Integer({ minimum: 1, description: "Attempt number, from 1." });

const jobParams = () => Type.Object({ id: jobIdParam() }, { additionalProperties: false });

/** Identity, onboarding, jobs (spec table of the same name). */
export const IDENTITY_ONBOARDING_JOBS_OPERATIONS = [
  defineOperation({
    id: "identity.current",
    method: "GET",
    path: "/api/identity",
    summary: "Who the caller is: principal, active tenant, role, scopes and memberships.",
    tag: "identity",
    security: { kind: "tenant", scope: "read" },
    request: {},
    response: { encoding: "json", schema: Identity },
    refusals: [...A],
    keyed: false,
    mcp: { tool: "identity_current", scope: "read" },
  }),
  defineOperation({
    id: "onboarding.surface",
    method: "GET",
    path: "/api/onboarding",
    summary: "The tenant's onboarding state: app installation, claim route and first job.",
    tag: "onboarding",
    security: { kind: "tenant", scope: "read" },
    request: {},
    response: { encoding: "json", schema: Onboarding },
    refusals: [...A],
    keyed: false,
    mcp: { tool: "onboarding_surface", scope: "read" },
  }),
  defineOperation({
    id: "onboarding.claim",
    method: "POST",
    path: "/api/onboarding/claims",
    summary: "Claim a source-hosting app installation for the active tenant.",
    tag: "onboarding",
    security: { kind: "tenant", scope: "admin" },
    request: { body: { encoding: "json", schema: ClaimRequest } },
    response: { encoding: "json", schema: ClaimReceipt },
    refusals: [...A, ...K, "invalid_request", "conflict", "upstream_failed"],
    keyed: true,
    mcp: { tool: "onboarding_claim", scope: "admin" },
  }),
  defineOperation({
    id: "jobs.list",
    method: "GET",
    path: "/api/jobs",
    summary: "List the tenant's jobs, newest first, with roll-up counts.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read" },
    request: {
      query: Type.Object(
        {
          repository: Type.Optional(RepositoryName("Only jobs of this repository.")),
          branch: Type.Optional(
            Type.String({ minLength: 1, maxLength: 256, description: "Only jobs of this branch." }),
          ),
          status: Type.Optional(
            Type.Union(
              JOB_STATUSES.map((s) => Type.Literal(s)),
              { description: "Only jobs in this status." },
            ),
          ),
          class: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: "Only jobs of this class." })),
          ...PageQuery(),
        },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: JobsPage },
    refusals: [...A, "invalid_request"],
    keyed: false,
    mcp: { tool: "jobs_list", scope: "read" },
  }),
  defineOperation({
    id: "jobs.submit",
    method: "POST",
    path: "/api/v4/jobs",
    summary: "Submit a captured Cargo workspace; the idempotency-key is the submission identity.",
    description:
      "A replay with the same key and body returns the original job; changed input is refused conflict. not_found: the repository is not onboarded, or the archive upload does not exist for it; gone: the archive upload expired; conflict also when the upload is not verified, its manifest_sha256 differs, or another submission claimed it.",
    tag: "jobs",
    security: { kind: "tenant", scope: "submit" },
    // The inline source is legacy (an integer per byte, ~4 body bytes per source byte) and is
    // parsed whole on the event loop: 16 MiB bounds that to well under a second. Larger
    // sources go through the streamed archive (schema_version 2), whose body is a reference.
    request: { body: { encoding: "json", schema: CargoWorkspaceRequest, maxBytes: 16 * 1024 * 1024 } },
    response: { encoding: "json", schema: JobId },
    refusals: [...A, ...K, "invalid_request", "not_found", "conflict", "gone"],
    keyed: true,
    idempotency: "durable-owner",
    mcp: { tool: "jobs_submit", scope: "submit" },
  }),
  defineOperation({
    id: "jobs.get",
    method: "GET",
    path: "/api/jobs/{id}",
    summary: "Read a job.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read" },
    request: { params: jobParams() },
    response: { encoding: "json", schema: Job },
    refusals: [...A, "not_found"],
    keyed: false,
    mcp: { tool: "jobs_get", scope: "read" },
  }),
  defineOperation({
    id: "jobs.evidence",
    method: "GET",
    path: "/api/jobs/{id}/evidence",
    summary: "A job's evidence report: phases, crates, caches, injections, tests, units, usage, attempts, settlement.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read" },
    request: {
      params: jobParams(),
      query: Type.Object(
        { cursor: Type.Optional(Cursor()) },
        { additionalProperties: false, description: "cursor: the attempt evidence page to read." },
      ),
    },
    response: { encoding: "json", schema: JobEvidence },
    refusals: [...A, "not_found", "invalid_request"],
    keyed: false,
    mcp: { tool: "jobs_evidence", scope: "read" },
  }),
  defineOperation({
    id: "jobs.cargo_output",
    method: "GET",
    path: "/api/jobs/{id}/attempts/{attempt}/cargo-output",
    summary: "The retained Cargo output of one attempt, byte for byte.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read" },
    request: {
      params: Type.Object({ id: jobIdParam(), attempt: attemptParam() }, { additionalProperties: false }),
    },
    response: {
      encoding: "bytes",
      contentType: "application/octet-stream",
      description: "Cargo's stdout and stderr of the attempt as retained, in the order written.",
    },
    refusals: [...A, "not_found"],
    keyed: false,
  }),
  defineOperation({
    id: "jobs.artifacts",
    method: "GET",
    path: "/api/jobs/{id}/artifacts",
    summary: "The job's published artifacts per attempt, with sizes and digests.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read" },
    request: { params: jobParams() },
    response: { encoding: "json", schema: ArtifactInventory },
    refusals: [...A, "not_found", "gone"],
    keyed: false,
    mcp: { tool: "jobs_artifacts", scope: "read" },
  }),
  defineOperation({
    id: "jobs.artifact_bytes",
    method: "GET",
    path: "/api/jobs/{id}/artifacts/{attempt}/{index}",
    summary: "Download one published artifact file.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read" },
    request: {
      params: Type.Object(
        {
          id: jobIdParam(),
          attempt: attemptParam(),
          index: Type.Integer({ minimum: 0, description: "The file's index in its publication." }),
        },
        { additionalProperties: false },
      ),
    },
    response: {
      encoding: "bytes",
      contentType: "application/octet-stream",
      description: "The file's bytes; their SHA-256 is the inventory's sha256.",
    },
    refusals: [...A, "not_found", "gone"],
    keyed: false,
  }),
  defineOperation({
    id: "jobs.logs",
    method: "GET",
    path: "/api/jobs/{id}/logs",
    summary: "A page of the job's durable log from a cursor.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read", cookie: true },
    request: { params: jobParams(), query: Type.Object(PageQuery(100), { additionalProperties: false }) },
    response: { encoding: "json", schema: JobLogPage },
    refusals: [...A, "not_found", "invalid_request"],
    keyed: false,
    mcp: { tool: "jobs_logs", scope: "read" },
  }),
  defineOperation({
    id: "jobs.logs_stream",
    method: "GET",
    path: "/api/jobs/{id}/logs/stream",
    summary: "Stream the job's log pages from a cursor until the job settles.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read", cookie: true },
    request: { params: jobParams(), query: Type.Object(PageQuery(100), { additionalProperties: false }) },
    response: {
      encoding: "sse",
      description:
        "Server-sent events named `log`, each one log page (id: its next_cursor); the stream ends after the settled page. Resume with `cursor`.",
      event: JobLogStreamFrame,
    },
    refusals: [...A, "not_found", "invalid_request"],
    keyed: false,
  }),
  defineOperation({
    id: "jobs.logs_search",
    method: "GET",
    path: "/api/jobs/{id}/logs/search",
    summary: "Find the lines of the job's whole log that contain a text.",
    description:
      "Searches every line stored so far, from `cursor` on, ignoring ANSI escapes and the case of letters; " +
      "each match names its sequence, which jobs.logs and the job page's `?log_line=` open. A search that " +
      "stopped at `limit` matches continues with next_cursor.",
    tag: "jobs",
    security: { kind: "tenant", scope: "read", cookie: true },
    request: {
      params: jobParams(),
      query: Type.Object(
        {
          q: Type.String({ minLength: 1, maxLength: 200, description: "The text to find (not a pattern)." }),
          cursor: Type.Optional(Cursor()),
          limit: Type.Optional(
            Type.Integer({ minimum: 1, maximum: 500, default: 100, description: "Matches per answer, 1 to 500." }),
          ),
        },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: JobLogSearchResult },
    refusals: [...A, "not_found", "invalid_request"],
    keyed: false,
    mcp: { tool: "jobs_logs_search", scope: "read" },
    extension: {
      reason:
        "Log search (issue 36): the spec reads a log only page by page from a cursor; finding one line of a 20,000-line log took every page.",
    },
  }),
  defineOperation({
    id: "jobs.cancel",
    method: "POST",
    path: "/api/jobs/{id}/cancel",
    summary: "Request cancellation of a non-terminal job: running units are reaped and metering closes.",
    description:
      "A job cancelled before placement settles with no attempt and no usage record. A terminal job gives conflict.",
    tag: "jobs",
    security: { kind: "tenant", scope: "submit" },
    request: { params: jobParams() },
    response: { encoding: "json", schema: CancellationReceipt },
    refusals: [...A, ...K, "not_found", "conflict", "upstream_failed"],
    keyed: true,
    mcp: { tool: "jobs_cancel", scope: "submit" },
  }),
  defineOperation({
    id: "jobs.retry",
    method: "POST",
    path: "/api/jobs/{id}/retry",
    summary: "Retry a terminal job as a fresh linked job with the same submission.",
    description: "A job that is not terminal gives conflict.",
    tag: "jobs",
    security: { kind: "tenant", scope: "submit" },
    request: { params: jobParams() },
    response: { encoding: "json", schema: RetryReceipt },
    refusals: [...A, ...K, "not_found", "conflict"],
    keyed: true,
    mcp: { tool: "jobs_retry", scope: "submit" },
  }),
];
