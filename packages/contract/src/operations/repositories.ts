import { Type } from "@sinclair/typebox";
import { defineOperation } from "../operation.js";
import {
  Admission,
  DismissalReceipt,
  PurgeReceipt,
  PurgeRequest,
  RepositoriesPage,
  RepositoryOnboarded,
  RepositoryOnboardingRequest,
  RepositoryPage,
  RepositorySettings,
} from "../records/repositories.js";
import { SettingReceipt, SettingWrite } from "../records/settings.js";
import { TEST_HISTORY_SORTS, TEST_HISTORY_WINDOW, TestHistoryPage } from "../records/test-history.js";
import { A, K } from "../refusal-codes.js";
import { PageQuery } from "../schema-helpers.js";

/** One segment of `owner/name`. */
export const REPOSITORY_SEGMENT_PATTERN = "^[A-Za-z0-9_.-]{1,100}$";
export const ADVISORY_ID_PATTERN = "^[A-Za-z0-9_.:-]{1,128}$";

const repositoryParams = {
  owner: Type.String({ pattern: REPOSITORY_SEGMENT_PATTERN, description: "Repository owner." }),
  name: Type.String({ pattern: REPOSITORY_SEGMENT_PATTERN, description: "Repository name." }),
};
const RepositoryParams = () => Type.Object(repositoryParams, { additionalProperties: false });

/** Repositories (spec table of the same name). */
export const REPOSITORIES_OPERATIONS = [
  defineOperation({
    id: "repositories.admission",
    method: "GET",
    path: "/api/repositories/{owner}/{name}/admission",
    summary: "Confirm the repository is onboarded and resolve the merge base of base_ref.",
    tag: "repositories",
    security: { kind: "tenant", scope: "submit" },
    request: {
      params: RepositoryParams(),
      query: Type.Object(
        {
          base_ref: Type.String({
            minLength: 1,
            maxLength: 1024,
            description: "The base revision (branch, tag or commit id) whose merge base to resolve.",
          }),
        },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: Admission },
    refusals: [...A, "not_found", "upstream_failed"],
    keyed: false,
    mcp: { tool: "repositories_admission", scope: "submit" },
  }),
  defineOperation({
    id: "repositories.list",
    method: "GET",
    path: "/api/repositories",
    summary: "List the tenant's onboarded repositories with lineages, storage and advisories.",
    tag: "repositories",
    security: { kind: "tenant", scope: "read" },
    request: { query: Type.Object(PageQuery(), { additionalProperties: false }) },
    response: { encoding: "json", schema: RepositoriesPage },
    refusals: [...A, "invalid_request"],
    keyed: false,
    mcp: { tool: "repositories_list", scope: "read" },
  }),
  defineOperation({
    id: "repositories.get",
    method: "GET",
    path: "/api/repositories/{owner}/{name}",
    summary: "One repository: its lineages, storage and advisories.",
    tag: "repositories",
    security: { kind: "tenant", scope: "read" },
    request: { params: RepositoryParams() },
    response: { encoding: "json", schema: RepositoryPage },
    refusals: [...A, "not_found"],
    keyed: false,
    mcp: { tool: "repositories_get", scope: "read" },
  }),
  defineOperation({
    id: "repositories.settings.get",
    method: "GET",
    path: "/api/repositories/{owner}/{name}/settings",
    summary: "The repository's settings at their current version; reading has no lifecycle effect.",
    tag: "repositories",
    security: { kind: "tenant", scope: "submit" },
    request: { params: RepositoryParams() },
    response: { encoding: "json", schema: RepositorySettings },
    refusals: [...A, "not_found"],
    keyed: false,
    mcp: { tool: "repositories_settings_get", scope: "submit" },
  }),
  defineOperation({
    id: "repositories.settings.write",
    method: "POST",
    path: "/api/repositories/{owner}/{name}/settings",
    summary: "Write repository settings at the version observed; they apply from the next admitted job.",
    description:
      "Accepts affected_tests, total_injection_opt_out and wall_clock_ceiling_seconds in `changes`, and the kiln " +
      "extensions flaky_retries (integer 0..5, default 2: how many times a test job re-runs a failed test by its " +
      "exact name; 0 turns it off) and flaky_policy (`pass`, the default: a test that failed and then passed " +
      "passes the job; `fail`: it keeps cargo's failing verdict); any other name is refused invalid_request.",
    tag: "repositories",
    security: { kind: "tenant", scope: "settings" },
    request: { params: RepositoryParams(), body: { encoding: "json", schema: SettingWrite } },
    response: { encoding: "json", schema: SettingReceipt },
    refusals: [...A, ...K, "invalid_request", "stale_version"],
    keyed: true,
    mcp: { tool: "repositories_settings_write", scope: "settings" },
  }),
  defineOperation({
    id: "repositories.advisories.dismiss",
    method: "POST",
    path: "/api/repositories/{owner}/{name}/advisories/{advisory}/dismissal",
    summary: "Dismiss an advisory; the dismissal is remembered and attributed.",
    tag: "repositories",
    security: { kind: "tenant", scope: "settings" },
    request: {
      params: Type.Object(
        {
          ...repositoryParams,
          advisory: Type.String({ pattern: ADVISORY_ID_PATTERN, description: "The advisory's id." }),
        },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: DismissalReceipt },
    refusals: [...A, ...K, "not_found"],
    keyed: true,
    mcp: { tool: "repositories_advisories_dismiss", scope: "settings" },
  }),
  defineOperation({
    id: "repositories.lineages.purge",
    method: "POST",
    path: "/api/repositories/{owner}/{name}/purges",
    summary: "Purge a lineage so the next matching job starts cold; requires confirmation.",
    tag: "repositories",
    security: { kind: "tenant", scope: "admin" },
    request: { params: RepositoryParams(), body: { encoding: "json", schema: PurgeRequest } },
    response: { encoding: "json", schema: PurgeReceipt },
    refusals: [...A, ...K, "confirmation_required", "not_found", "invalid_request"],
    keyed: true,
    mcp: { tool: "repositories_lineages_purge", scope: "admin" },
  }),
  defineOperation({
    id: "repositories.onboard",
    method: "POST",
    path: "/api/repositories",
    summary: "Onboard a repository for the tenant, so its jobs are admitted; onboarding it again changes nothing.",
    description:
      "A tenant admin's self-service onboarding, without the source-hosting app (which stays the way to get " +
      "check runs: installing it onboards its repositories too). Audited. Keyed: a repeat under the same " +
      "idempotency-key returns the first answer.",
    tag: "repositories",
    security: { kind: "tenant", scope: "admin" },
    request: { body: { encoding: "json", schema: RepositoryOnboardingRequest } },
    response: { encoding: "json", schema: RepositoryOnboarded },
    refusals: [...A, ...K, "invalid_request"],
    keyed: true,
    mcp: { tool: "repositories_onboard", scope: "admin" },
    extension: {
      reason:
        "Self-service onboarding (issue 36): the spec onboards repositories only by the source-hosting app's installation claim.",
    },
  }),
  defineOperation({
    id: "repositories.tests",
    method: "GET",
    path: "/api/repositories/{owner}/{name}/tests",
    summary: "Which tests are flaky here, the slowest, the newly failing: per test recent outcomes, durations, trend.",
    description:
      "Per test: its recent outcomes with job ids, duration percentiles (p50, p90) and trend, and flaky rate. Over the repository's most recent `window` test jobs. sort: name (every test), slowest (by mean duration), " +
      "flakiest (only tests flaky at least once in the window, most often first), newly_failing (only tests whose " +
      "latest run failed after an earlier one passed, latest failure first). Another tenant's repository is " +
      "not_found, as a repository never onboarded is.",
    tag: "repositories",
    security: { kind: "tenant", scope: "read" },
    request: {
      params: RepositoryParams(),
      query: Type.Object(
        {
          window: Type.Optional(
            Type.Integer({
              minimum: 1,
              maximum: TEST_HISTORY_WINDOW.maximum,
              default: TEST_HISTORY_WINDOW.default,
              description: `Most recent test jobs to read, 1 to ${TEST_HISTORY_WINDOW.maximum} (default ${TEST_HISTORY_WINDOW.default}).`,
            }),
          ),
          sort: Type.Optional(
            Type.Union(
              TEST_HISTORY_SORTS.map((s) => Type.Literal(s)),
              { default: "name", description: "name (default), slowest, flakiest or newly_failing." },
            ),
          ),
          ...PageQuery(50),
        },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: TestHistoryPage },
    refusals: [...A, "invalid_request", "not_found"],
    keyed: false,
    mcp: { tool: "repositories_tests", scope: "read" },
    extension: {
      reason:
        "Test history (issue 37): the spec reports each job's tests in its evidence but has no read across a repository's jobs.",
    },
  }),
];
