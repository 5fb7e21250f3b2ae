import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { claimInstallation, createAgentCredential, revokeAgentCredential } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { GitHubApp } from "../src/domain/source-hosting/github-app.js";
import { DOGFOOD, type DogfoodTestApp, dogfoodTestApp, gateEvidenceFor, PROBES } from "./dogfood-fixtures.js";
import { GitHubSimulator } from "./github-simulator.js";

/**
 * Rule 9, quoted: "Gate evidence is verified against the platform's own records: a run record
 * against the ledger and the job its submission key admitted; a credential against the dogfood
 * tenant's credential inventory; a workflow run against the CI provider. An https reference is
 * accepted, marked attested, only for parts the platform cannot read."
 * And States and transitions: "dogfood gate | closed | operator.dogfood.gate.record | recording
 * opens the gate | open | the seven-day clock starts". The CI provider is the GitHub simulator
 * behind the real Octokit client.
 */
for (const dialect of DIALECTS) {
  describe(`dogfood entry gate, rule 9 (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: DogfoodTestApp;
    let sim: GitHubSimulator;
    let settled: string;
    const record = (body: object) => t.post("/operator/api/dogfood/gate/evidence", body);
    const refusedAs = async (body: object, code: string, why: RegExp) => {
      const r = await record(body);
      assert.equal(r.json().code, code, `${JSON.stringify(body)} → ${r.body}`);
      assert.match(r.json().detail, why);
    };

    before(async () => {
      sim = new GitHubSimulator();
      sim.installations.set(31, { account: "kiln", suspended: false, repositories: ["kiln/kiln"] });
      sim.installations.set(32, { account: "other", suspended: false, repositories: ["other/thing"] });
      sim.workflowRuns.set(9001, {
        repository: "kiln/kiln",
        name: "ci",
        head_sha: "a".repeat(40),
        status: "completed",
        conclusion: "success",
      });
      sim.workflowRuns.set(9002, {
        repository: "kiln/kiln",
        name: "ci",
        head_sha: "b".repeat(40),
        status: "completed",
        conclusion: "failure",
      });
      sim.workflowRuns.set(9003, {
        repository: "other/thing",
        name: "ci",
        head_sha: "c".repeat(40),
        status: "completed",
        conclusion: "success",
      });
      await sim.start();
      const gitHubApp = new GitHubApp(
        {
          appId: sim.appId,
          privateKey: sim.privateKey,
          webhookSecret: sim.webhookSecret,
          slug: "kiln-test",
          apiBaseUrl: sim.url,
          allowUnverifiedClaims: true,
        },
        silentLogger,
      );
      t = await dogfoodTestApp(await dialect.openFresh(), { gitHubApp });
      const now = t.clock.now();
      await claimInstallation(
        t.storage,
        { installationId: 31, tenantId: DOGFOOD, account: "kiln", claimedBy: "u_dogfood", repositories: ["kiln/kiln"] },
        now,
      );
      await claimInstallation(
        t.storage,
        { installationId: 32, tenantId: PROBES, account: "other", claimedBy: "u_probe", repositories: ["other/thing"] },
        now,
      );
      for (const name of ["submitter", "revoked-one"]) {
        await createAgentCredential(
          t.storage,
          {
            tenantId: DOGFOOD,
            name,
            tokenHash: `hash-${name}`,
            scopes: ["submit"],
            createdBy: "u_dogfood",
            expiresAt: new Date(now.getTime() + 30 * 86400_000).toISOString(),
            requestsPerMinute: 60,
          },
          now,
        );
      }
      await revokeAgentCredential(t.storage, { tenantId: DOGFOOD, name: "revoked-one", revokedBy: "u_dogfood" }, now);
      settled = `shadow:${await t.runJob({ tenant: DOGFOOD })}`;
    });
    after(async () => {
      await t.close();
      await sim.stop();
    });

    it("a run record is verified against the ledger: settled, admitted by its submission key; else invalid_request", async () => {
      const r = await record({ part: "a0_verdict", reference: settled });
      assert.equal(r.statusCode, 200, r.body);
      const body = r.json();
      assert.equal(body.evidence.source, "run_record");
      assert.equal(body.evidence.verification.run_record, settled);
      assert.equal(body.evidence.verification.admitted_by_submission_of, settled.slice("shadow:".length));
      assert.equal(body.newly_recorded, true);
      assert.equal(body.gate.state, "closed", "one part of fifteen does not open the gate");
      assert.equal(body.clock_started_at, null);

      await refusedAs({ part: "a1_outcomes", reference: "shadow:job_nosuchjob" }, "invalid_request", /no run record/);
      const queued = await t.queueJob({ tenant: DOGFOOD });
      await refusedAs({ part: "a1_outcomes", reference: `shadow:${queued}` }, "invalid_request", /has not settled/);
      // A probe is read in the canary tenant only: a dogfood job is no probe.
      await refusedAs(
        { part: "a1_outcomes", reference: settled.replace("shadow:", "probe:") },
        "invalid_request",
        /no run record/,
      );
      await refusedAs({ part: "a1_outcomes", reference: `${settled}#2` }, "invalid_request", /no run record/);
    });

    it("a credential is verified against the dogfood tenant's inventory: live, by name and issue time", async () => {
      const r = await record({ part: "submitter_credential", reference: "credential:submitter" });
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().evidence.source, "credential");
      // The evidence stops meeting the part when the credential expires.
      assert.equal(r.json().evidence.expires_at, r.json().evidence.verification.credential_expires_at);
      const issued = r.json().evidence.verification.issued_at;
      const exact = await record({ part: "submitter_credential", reference: `credential:submitter:${issued}` });
      assert.equal(exact.statusCode, 200, exact.body);
      await refusedAs(
        { part: "submitter_credential", reference: "credential:submitter:2020-01-01T00:00:00.000Z" },
        "invalid_request",
        /no live credential/,
      );
      await refusedAs(
        { part: "submitter_credential", reference: "credential:nobody" },
        "invalid_request",
        /no live credential/,
      );
      await refusedAs(
        { part: "submitter_credential", reference: "credential:revoked-one" },
        "invalid_request",
        /no live credential/,
      );
      await refusedAs(
        { part: "certificate_renewal", reference: "credential:submitter" },
        "invalid_request",
        /accepts attested/,
      );
    });

    it("a workflow run is verified against the CI provider: the dogfood repository's, completed with success", async () => {
      const r = await record({
        part: "transport_qualified_staging",
        reference: `${sim.url}/kiln/kiln/actions/runs/9001`,
      });
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().evidence.source, "workflow_run");
      assert.equal(r.json().evidence.verification.conclusion, "success");
      assert.equal(r.json().evidence.verification.head_sha, "a".repeat(40));
      assert.ok(sim.requests.some((q) => q.path === "/repos/kiln/kiln/actions/runs/9001" && q.status === 200));
      await refusedAs(
        { part: "a1_outcomes", reference: `${sim.url}/kiln/kiln/actions/runs/9002` },
        "invalid_request",
        /not completed with success/,
      );
      await refusedAs(
        { part: "a1_outcomes", reference: `${sim.url}/kiln/kiln/actions/runs/9999` },
        "invalid_request",
        /no workflow run 9999/,
      );
      await refusedAs(
        { part: "a1_outcomes", reference: `${sim.url}/other/thing/actions/runs/9003` },
        "invalid_request",
        /not a repository of the dogfood tenant/,
      );
    });

    it("an https reference is accepted, marked attested, only for parts the platform cannot read", async () => {
      const attested = {
        part: "alerts_observed",
        reference: "https://evidence.example/alerts/2026-11-22",
        detail: "the paging alert fired and was acknowledged",
        produced_at: t.clock.now().toISOString(),
      };
      const r = await record(attested);
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().evidence.source, "attested");
      assert.equal(r.json().evidence.verification.attested, true);
      await refusedAs(
        { ...attested, part: "a0_verdict" },
        "invalid_request",
        /accepts run_record or workflow_run evidence, not attested/,
      );
      await refusedAs(
        { part: "reboot_recovery", reference: "https://evidence.example/x" },
        "invalid_request",
        /detail/,
      );
      await refusedAs(
        { part: "a1_outcomes", reference: settled, detail: "x", produced_at: attested.produced_at },
        "invalid_request",
        /attested reference only/,
      );
      await refusedAs({ part: "a1_outcomes", reference: "ftp://nowhere" }, "invalid_request", /none of/);
    });

    it("the same evidence again is the recorded one; other content under the same part and reference is conflict", async () => {
      const again = await record({ part: "a0_verdict", reference: settled });
      assert.equal(again.statusCode, 200, again.body);
      assert.equal(again.json().newly_recorded, false);
      const expires = new Date(t.clock.now().getTime() + 86400_000).toISOString();
      const other = await record({ part: "a0_verdict", reference: settled, expires_at: expires });
      assert.equal(other.statusCode, 409, other.body);
      assert.equal(other.json().code, "conflict");
      await refusedAs(
        { part: "a1_outcomes", reference: settled, expires_at: "2020-01-01T00:00:00Z" },
        "invalid_request",
        /has passed/,
      );
      const audit = await t.operatorAudit();
      assert.ok(audit.some((e) => e.operation === "operator.dogfood.gate.record" && e.outcome === "conflict"));
      assert.ok(audit.some((e) => e.operation === "operator.dogfood.gate.record" && e.outcome === "replayed"));
    });

    it("recording the last missing part opens the gate and starts the seven-day clock; expired evidence shows what the part lacks", async () => {
      const now = t.clock.now();
      const all = gateEvidenceFor(settled, "submitter", now);
      // cold_darm_run's evidence expires in one hour; every other part holds.
      const staged = all.map((e) =>
        e.part === "cold_darm_run" ? { ...e, expires_at: new Date(now.getTime() + 3600_000).toISOString() } : e,
      );
      // Some parts were met by the tests above; the recording that meets the last missing one
      // opens the gate — exactly one recording starts the clock, and later ones find it open.
      const answers: { part: string; gate: string; clock: string | null }[] = [];
      for (const body of staged) {
        const r = await record(body);
        assert.equal(r.statusCode, 200, `${body.part}: ${r.body}`);
        answers.push({ part: body.part, gate: r.json().gate.state, clock: r.json().clock_started_at });
      }
      const opening = answers.findIndex((a) => a.clock !== null);
      assert.ok(opening >= 0, "one recording opened the gate");
      assert.equal(answers[opening]?.clock, now.toISOString());
      assert.ok(answers.slice(0, opening).every((a) => a.gate === "closed" && a.clock === null));
      assert.ok(answers.slice(opening).every((a) => a.gate === "open"));
      assert.ok(
        answers.slice(opening + 1).every((a) => a.clock === null),
        "the clock starts once",
      );

      const period = (await t.get("/operator/api/dogfood/period")).json();
      assert.equal(period.state, "running");
      assert.equal(period.clock.started_at, now.toISOString());
      assert.equal(period.clock.ends_at, new Date(now.getTime() + 7 * 86400_000).toISOString());

      await t.clock.advance(2 * 3600 * 1000);
      const laterResponse = await t.get("/operator/api/dogfood/period");
      assert.equal(laterResponse.statusCode, 200, laterResponse.body);
      const later = laterResponse.json();
      const parts = later.gate.conditions.flatMap(
        (c: { parts: { part: string; evidence: unknown; lacks: string | null }[] }) => c.parts,
      );
      const cold = parts.find((p: { part: string }) => p.part === "cold_darm_run");
      assert.match(cold.lacks, /expired at/);
      assert.equal(cold.evidence, null);
      const staging = parts.find((p: { part: string }) => p.part === "transport_qualified_staging");
      assert.equal(staging.lacks, null, "staging is still met by its unexpired evidence");
      assert.equal(later.gate.state, "open", "the gate admitted the trial once; it stays open");
    });
  });
}
