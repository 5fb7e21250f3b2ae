import type { DogfoodGateEvidenceRequest } from "@kiln/contract";
import {
  type AgentCredentialRow,
  findInstallationOfRepository,
  findJobBySubmissionKey,
  listAgentCredentials,
  type StorageOrTransaction,
} from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { refuse } from "../refusal.js";
import { type GitHubApp, ProviderError } from "../source-hosting/github-app.js";
import { acceptedSources, type EvidenceSource, type GatePart } from "./entry-gate.js";
import { parseRunRecordId } from "./run-record-identity.js";
import type { TrialLedger } from "./trial-ledger.js";

type GateRequest = Static<typeof DogfoodGateEvidenceRequest>;

/** What verification found: the evidence's source, what was read, and when it stops meeting the part. */
export interface VerifiedReference {
  readonly source: EvidenceSource;
  readonly verification: Record<string, unknown>;
  readonly expiresAt: string | null;
}

const WORKFLOW_RUN_PATH = /^([A-Za-z0-9_.-]{1,100})\/([A-Za-z0-9_.-]{1,100})\/actions\/runs\/(\d{1,18})\/?$/;

/**
 * Rule 9: gate evidence is verified against the platform's own records — a run record against
 * the ledger and the job its submission key admitted; a credential against the dogfood tenant's
 * credential inventory; a workflow run against the CI provider. An https reference is accepted,
 * marked attested, only for parts the platform cannot read. Anything else is `invalid_request`.
 */
export async function verifyGateReference(input: {
  readonly db: StorageOrTransaction;
  readonly ledger: TrialLedger;
  readonly gitHubApp: GitHubApp | undefined;
  readonly request: GateRequest;
  readonly now: Date;
}): Promise<VerifiedReference> {
  const { request, now } = input;
  const part = request.part as GatePart;
  const reference = request.reference;
  const accepts = acceptedSources(part);
  const expiresAt = request.expires_at ?? null;
  if (expiresAt !== null && Date.parse(expiresAt) <= now.getTime()) {
    refuse("invalid_request", `expires_at ${expiresAt} has passed: the evidence no longer meets the part`);
  }
  const demand = (source: EvidenceSource) => {
    if (!accepts.includes(source)) {
      refuse("invalid_request", `part ${part} accepts ${accepts.join(" or ")} evidence, not ${source}`);
    }
    if (source !== "attested" && (request.detail !== undefined || request.produced_at !== undefined)) {
      refuse("invalid_request", "detail and produced_at belong to an attested reference only");
    }
  };

  if (parseRunRecordId(reference) !== null) {
    demand("run_record");
    return { ...(await verifyRunRecord(input.db, input.ledger, reference)), expiresAt };
  }
  if (reference.startsWith("credential:")) {
    demand("credential");
    return verifyCredential(input.db, input.ledger.tenants.dogfood, reference, expiresAt, now);
  }
  const app = input.gitHubApp;
  if (app !== undefined && reference.startsWith(`${app.webBase}/`)) {
    const path = WORKFLOW_RUN_PATH.exec(reference.slice(app.webBase.length + 1));
    if (path !== null) {
      demand("workflow_run");
      return { ...(await verifyWorkflowRun(input.db, app, input.ledger.tenants.dogfood, path)), expiresAt };
    }
  }
  if (/^https:\/\/[^\s/]+/.test(reference)) {
    demand("attested");
    if (request.detail === undefined || request.produced_at === undefined) {
      refuse(
        "invalid_request",
        "an attested reference names what it shows (detail) and when it was produced (produced_at)",
      );
    }
    if (Date.parse(request.produced_at) > now.getTime()) {
      refuse("invalid_request", `produced_at ${request.produced_at} is in the future`);
    }
    return { source: "attested", verification: { attested: true }, expiresAt };
  }
  return refuse(
    "invalid_request",
    "reference is none of a run record identity, credential:<name>[:<issued_at>], a CI workflow run of the dogfood repository or an https reference",
  );
}

async function verifyRunRecord(
  db: StorageOrTransaction,
  ledger: TrialLedger,
  reference: string,
): Promise<Omit<VerifiedReference, "expiresAt">> {
  const record = ledger.resolve(reference);
  if (record === undefined) refuse("invalid_request", `no run record ${reference} in the ledger`);
  const settlements = ledger.settlementsOf(record.job.id);
  if (settlements.length === 0) refuse("invalid_request", `run record ${reference} has not settled`);
  // The job its submission key admitted: a retry carries no key, so follow it to the keyed original.
  let origin = record.job;
  for (let hops = 0; origin.submission_key === null && origin.retry_of !== null && hops < 100; hops += 1) {
    const previous = ledger.jobs.find((j) => j.id === origin.retry_of);
    if (previous === undefined) break;
    origin = previous;
  }
  if (origin.submission_key === null) {
    refuse("invalid_request", `run record ${reference} has no submission key that admitted it`);
  }
  const admitted = await findJobBySubmissionKey(db, { tenantId: origin.tenant_id, key: origin.submission_key });
  if (admitted?.id !== origin.id) {
    refuse("invalid_request", `the submission key of run record ${reference} admitted another job`);
  }
  return {
    source: "run_record",
    verification: {
      run_record: record.id,
      job: record.job.id,
      tenant: record.job.tenant_id,
      status: record.job.status,
      admitted_by_submission_of: origin.id,
      settlements: settlements.length,
    },
  };
}

async function verifyCredential(
  db: StorageOrTransaction,
  tenant: string,
  reference: string,
  expiresAt: string | null,
  now: Date,
): Promise<VerifiedReference> {
  const rest = reference.slice("credential:".length);
  const colon = rest.indexOf(":");
  const name = colon < 0 ? rest : rest.slice(0, colon);
  const issuedAt = colon < 0 ? null : rest.slice(colon + 1);
  if (name === "" || (issuedAt !== null && Number.isNaN(Date.parse(issuedAt)))) {
    refuse("invalid_request", "a credential reference is credential:<name> or credential:<name>:<issued_at>");
  }
  const all: AgentCredentialRow[] = [];
  let cursor: string | null = null;
  do {
    const page = await listAgentCredentials(db, { tenantId: tenant, limit: 1000, cursor });
    all.push(...page.rows);
    cursor = page.nextCursor;
  } while (cursor !== null);
  const live = all.filter(
    (c) =>
      c.name === name &&
      c.revoked_at === null &&
      Date.parse(c.expires_at) > now.getTime() &&
      (issuedAt === null || Date.parse(c.created_at) === Date.parse(issuedAt)),
  );
  const credential = live[0];
  if (credential === undefined) {
    refuse("invalid_request", `the dogfood tenant ${tenant} holds no live credential ${reference.slice(11)}`);
  }
  // The evidence stops meeting the part when the credential expires, if not earlier.
  const expires =
    expiresAt === null || Date.parse(credential.expires_at) < Date.parse(expiresAt) ? credential.expires_at : expiresAt;
  return {
    source: "credential",
    verification: { tenant, name, issued_at: credential.created_at, credential_expires_at: credential.expires_at },
    expiresAt: expires,
  };
}

async function verifyWorkflowRun(
  db: StorageOrTransaction,
  app: GitHubApp,
  tenant: string,
  path: RegExpExecArray,
): Promise<Omit<VerifiedReference, "expiresAt">> {
  const repository = `${path[1]}/${path[2]}`;
  const runId = Number(path[3]);
  const installation = await findInstallationOfRepository(db, { tenantId: tenant, repository });
  if (installation === undefined || installation.state !== "active") {
    refuse("invalid_request", `${repository} is not a repository of the dogfood tenant ${tenant}`);
  }
  let run: Awaited<ReturnType<GitHubApp["workflowRun"]>>;
  try {
    run = await app.workflowRun(installation.installationId, repository, runId);
  } catch (error) {
    if (error instanceof ProviderError && error.status === 404) {
      refuse("invalid_request", `the CI provider has no workflow run ${runId} of ${repository}`);
    }
    if (error instanceof ProviderError) refuse("unavailable", `the CI provider did not answer: ${error.message}`);
    throw error;
  }
  if (run.status !== "completed" || run.conclusion !== "success") {
    refuse(
      "invalid_request",
      `workflow run ${runId} of ${repository} is ${run.status ?? "unknown"}/${run.conclusion ?? "none"}, not completed with success`,
    );
  }
  return {
    source: "workflow_run",
    verification: {
      repository,
      run_id: run.id,
      workflow: run.name,
      head_sha: run.headSha,
      conclusion: run.conclusion,
      html_url: run.htmlUrl,
    },
  };
}
