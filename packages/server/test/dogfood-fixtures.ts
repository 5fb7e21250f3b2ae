import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import type { AttemptReport } from "@kiln/contract";
import { createAgentCredential, createTenant, insertJob, newJobId, type Storage } from "@kiln/storage";
import { queuedJob } from "@kiln/storage/testing";
import type { LightMyRequestResponse } from "fastify";
import { runDogfoodLedgerAudit } from "../src/domain/dogfood/ledger-audit.js";
import { CANARY_TENANT, DEFAULT_DOGFOOD_TENANT } from "../src/domain/platform/platform-tenants.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { type AttemptLease, claimJob, FIXTURE_ADMISSION, finishJob, hostReport } from "../src/testing/job-fixtures.js";
import type { AppDeps } from "../src/web/http/app-deps.js";
import { bootstrapOperatorCredential, operatorSessionHeaders } from "./operator-session-fixture.js";

/**
 * The dogfood trial's test app: the real app on real storage with the dogfood and canary tenants,
 * an operator session, and jobs run through the real storage verbs (insertJob, claimNextJob,
 * finishAttempt) on the app's injected clock, so a simulated week takes milliseconds.
 */
export interface DogfoodTestApp extends TestApp {
  get(url: string): Promise<LightMyRequestResponse>;
  post(url: string, body: object): Promise<LightMyRequestResponse>;
  /** Runs one job of `tenant` to its end; answers its id. */
  runJob(input: RunJobInput): Promise<string>;
  /** Accepts a job and leaves it queued. */
  queueJob(input: { tenant: string; repository?: string; headSha?: string }): Promise<string>;
  /** One pass of the ledger audit (the loop's body), on the app's clock. */
  audit(): Promise<{ id: string; class: string }[]>;
  /** The operator audit, newest first. */
  operatorAudit(): Promise<{ actor: string; operation: string; target: string; outcome?: string }[]>;
}

export interface RunJobInput {
  readonly tenant: string;
  readonly repository?: string;
  readonly headSha?: string;
  readonly outcome?: "passed" | "failed";
  /** Seconds between placement and finish (default 60). */
  readonly seconds?: number;
  readonly report?: (lease: AttemptLease, now: Date) => AttemptReport;
  readonly cargoOutput?: string;
}

export const DOGFOOD = DEFAULT_DOGFOOD_TENANT;
export const PROBES = CANARY_TENANT;

let jobs = 0;

export async function dogfoodTestApp(storage: Storage, overrides: Partial<AppDeps> = {}): Promise<DogfoodTestApp> {
  const t = await testApp(storage, overrides);
  for (const id of [DOGFOOD, PROBES]) await createTenant(storage, { id }, t.clock.now());
  const credential = await bootstrapOperatorCredential(storage, t.clock.now());
  // Operator sessions expire on the clock the tests move by days: a fresh one per request.
  const session = () => operatorSessionHeaders(t.app, credential);

  const queueJob = async (input: { tenant: string; repository?: string; headSha?: string }) => {
    jobs += 1;
    const now = t.clock.now();
    const { job } = await insertJob(
      storage,
      queuedJob(
        {
          id: newJobId(now),
          tenant: input.tenant,
          submissionKey: `dogfood-${process.pid}-${jobs}`,
          requestHash: createHash("sha256").update(`dogfood-${jobs}`).digest("hex"),
          queuedAt: now.toISOString(),
        },
        {
          repository: input.repository ?? "kiln/kiln",
          head_sha: input.headSha ?? null,
          submitted_by: "u_dogfood",
          invocation: JSON.stringify({ operation: "test", arguments: ["--workspace"], artifacts: [] }),
          admitted: JSON.stringify(FIXTURE_ADMISSION),
        },
      ),
    );
    return job.id;
  };

  const runJob = async (input: RunJobInput) => {
    const id = await queueJob(input);
    const lease = await claimJob(storage, id, t.clock.now());
    await t.clock.advance((input.seconds ?? 60) * 1000);
    const now = t.clock.now();
    await finishJob(storage, t.deps.blobs, lease, {
      now,
      outcome: input.outcome ?? "passed",
      report: (input.report ?? hostReport)(lease, now),
      cargoOutput: Buffer.from(input.cargoOutput ?? "test result: ok. 1 passed; 0 failed\n"),
    });
    return id;
  };

  return {
    ...t,
    get: async (url) => t.app.inject({ method: "GET", url, headers: await session() }),
    post: async (url, body) =>
      t.app.inject({
        method: "POST",
        url,
        headers: { ...(await session()), "content-type": "application/json" },
        payload: JSON.stringify(body),
      }),
    runJob,
    queueJob,
    audit: async () =>
      (
        await runDogfoodLedgerAudit({
          storage,
          blobs: t.deps.blobs,
          clock: t.clock,
          dogfoodTenant: t.deps.dogfoodTenant,
          log: { error: () => {}, warn: () => {}, info: () => {} },
        })
      ).map((r) => ({ id: r.id, class: r.class })),
    operatorAudit: async () => {
      const r = await t.app.inject({ method: "GET", url: "/operator/api/audit", headers: await session() });
      assert.equal(r.statusCode, 200, r.body);
      return r.json();
    },
  };
}

/** Every gate part with a reference the platform accepts for it, given a settled dogfood run record and a live credential. */
export function gateEvidenceFor(runRecord: string, credential: string, now: Date) {
  const attested = (part: string) => ({
    part,
    reference: `https://evidence.example/kiln/${part}`,
    detail: `the operator observed ${part}`,
    produced_at: now.toISOString(),
  });
  return [
    { part: "a0_verdict", reference: runRecord },
    { part: "a1_outcomes", reference: runRecord },
    { part: "cold_darm_run", reference: runRecord },
    { part: "no_duplicate_settlement", reference: runRecord },
    { part: "continuous_observation", reference: runRecord },
    attested("certificate_renewal"),
    attested("expired_identity_recovery"),
    attested("reboot_recovery"),
    attested("provider_unavailable_recovery"),
    attested("staged_release_reverted"),
    attested("alerts_observed"),
    attested("off_host_evidence_observed"),
    { part: "transport_qualified_production", reference: runRecord },
    { part: "transport_qualified_staging", reference: runRecord },
    { part: "submitter_credential", reference: `credential:${credential}` },
  ];
}

/**
 * Opens the entry gate now: runs one dogfood job to a settled run record, mints the submitter
 * credential and records evidence for all fifteen parts. Answers when the clock started.
 */
export async function openGate(t: DogfoodTestApp): Promise<string> {
  const runRecord = `shadow:${await t.runJob({ tenant: DOGFOOD })}`;
  const now = t.clock.now();
  await createAgentCredential(
    t.storage,
    {
      tenantId: DOGFOOD,
      name: "submitter",
      tokenHash: "hash-submitter",
      scopes: ["submit"],
      createdBy: "u_dogfood",
      expiresAt: new Date(now.getTime() + 365 * 86400_000).toISOString(),
      requestsPerMinute: 60,
    },
    now,
  );
  let started: string | null = null;
  for (const body of gateEvidenceFor(runRecord, "submitter", now)) {
    const r = await t.post("/operator/api/dogfood/gate/evidence", body);
    assert.equal(r.statusCode, 200, `${body.part}: ${r.body}`);
    started = r.json().clock_started_at ?? started;
  }
  assert.equal(started, now.toISOString(), "the last part opened the gate");
  return now.toISOString();
}
