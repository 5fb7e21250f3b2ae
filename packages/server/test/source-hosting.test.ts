import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type AttemptReport, silentLogger } from "@kiln/contract";
import { readCheckRun } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { annotationsOf, escapeTestPath, failureAnnotations } from "../src/domain/source-hosting/check-run-report.js";
import { type CheckRunEvent, CheckRunReporter } from "../src/domain/source-hosting/check-run-reporter.js";
import { GitHubApp, gitHubAppConfigFromEnv, webBaseOf } from "../src/domain/source-hosting/github-app.js";
import {
  appWithTenant,
  bearer,
  hostProtocolOf,
  personWithToken,
  type TestApp,
  testApp,
} from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { GitHubSimulator } from "./github-simulator.js";

const sha = (n: number) => n.toString(16).padStart(40, "0");
const ROOT = sha(1);
const MAIN = sha(2);
const FEATURE = sha(3);
const HEAD = sha(0xabc);

/** The simulator with one installation (account acme) covering two repositories. */
async function simulator(): Promise<GitHubSimulator> {
  const sim = new GitHubSimulator();
  sim.installations.set(101, { account: "acme", suspended: false, repositories: ["acme/widget", "acme/gadget"] });
  sim.installations.set(202, { account: "other", suspended: false, repositories: ["other/thing"] });
  sim.repositories.set("acme/widget", {
    defaultBranch: "main",
    refs: { main: MAIN, feature: FEATURE },
    commits: { [ROOT]: [], [MAIN]: [ROOT], [FEATURE]: [ROOT], [HEAD]: [MAIN] },
  });
  await sim.start();
  return sim;
}

const appOf = (sim: GitHubSimulator, allowUnverifiedClaims = true) =>
  new GitHubApp(
    {
      appId: sim.appId,
      privateKey: sim.privateKey,
      webhookSecret: sim.webhookSecret,
      slug: "kiln-test",
      apiBaseUrl: sim.url,
      allowUnverifiedClaims,
    },
    silentLogger,
  );

describe("source-hosting configuration", () => {
  it("is absent when nothing is set, and a partial configuration names what is missing", () => {
    assert.equal(gitHubAppConfigFromEnv({}), null);
    assert.throws(() => gitHubAppConfigFromEnv({ KILN_GITHUB_APP_ID: "1" }), /KILN_GITHUB_WEBHOOK_SECRET/);
    assert.throws(
      () =>
        gitHubAppConfigFromEnv({
          KILN_GITHUB_APP_ID: "1",
          KILN_GITHUB_APP_PRIVATE_KEY: "not a key",
          KILN_GITHUB_WEBHOOK_SECRET: "s",
          KILN_GITHUB_APP_SLUG: "kiln",
        }),
      (error: Error) => /not a PEM private key/.test(error.message) && !error.message.includes("not a key"),
    );
  });

  it("derives the web origin for github.com and GitHub Enterprise Server", () => {
    assert.equal(webBaseOf("https://api.github.com"), "https://github.com");
    assert.equal(webBaseOf("https://ghe.example.com/api/v3"), "https://ghe.example.com");
  });

  it("reads annotations from compiler messages and test panics, escaping test paths", () => {
    const output = [
      JSON.stringify({
        reason: "compiler-message",
        message: {
          level: "warning",
          message: "unused variable: `x`",
          rendered: "warning: unused variable: `x`",
          spans: [{ file_name: "src/lib.rs", line_start: 3, line_end: 3, is_primary: true }],
        },
      }),
      JSON.stringify({
        reason: "compiler-message",
        message: {
          level: "warning",
          message: "in a dependency",
          spans: [{ file_name: "/kiln/deps/x/src/lib.rs", line_start: 1, line_end: 1, is_primary: true }],
        },
      }),
      "thread 'tests::adds' panicked at src/lib.rs:12:9:",
      "thread 'tests::not_failed' panicked at src/lib.rs:40:9:",
    ].join("\n");
    const annotations = annotationsOf(output, new Set(["tests::adds"]));
    assert.deepEqual(
      annotations.map((a) => [a.path, a.start_line, a.annotation_level]),
      [
        ["src/lib.rs", 3, "warning"],
        ["src/lib.rs", 12, "failure"],
      ],
    );
    assert.equal(annotations[1]?.title, `test ${escapeTestPath("tests::adds")} failed`);
    assert.ok(!(annotations[1]?.message ?? "").includes("::"));
  });

  it("reads Rust 1.89's panic header, which names the thread's id", () => {
    const annotations = annotationsOf(
      "thread 'tests::adds' (4242) panicked at src/lib.rs:12:9:",
      new Set(["tests::adds"]),
    );
    assert.deepEqual(
      annotations.map((a) => [a.path, a.start_line]),
      [["src/lib.rs", 12]],
    );
  });

  it("annotates the host's reported failures at their repository paths, with rustc's rendering and the panic's message", () => {
    const at = (file: string, line: number, inRepository = true) => ({
      file,
      line,
      column: 5,
      in_repository: inRepository,
      printed: `${file}:${line}:5`,
    });
    const annotations = failureAnnotations([
      {
        kind: "compiler_error",
        message: "mismatched types",
        code: "E0308",
        target: null,
        test: null,
        location: at("rust/crates/parser/src/lib.rs", 2),
        rendered: "error[E0308]: mismatched types\n --> crates/parser/src/lib.rs:2:5",
      },
      {
        kind: "compiler_error",
        message: "in a dependency",
        code: null,
        target: null,
        test: null,
        location: at("/kiln/home/registry/src/x/src/lib.rs", 1, false),
      },
      {
        kind: "test_panic",
        message: "assertion `left == right` failed: two is not three",
        code: null,
        target: "parser (lib)",
        test: "tests::noisy",
        location: at("rust/crates/parser/src/lib.rs", 17),
      },
    ]);
    assert.deepEqual(
      annotations.map((a) => [a.path, a.start_line, a.annotation_level, a.title]),
      [
        ["rust/crates/parser/src/lib.rs", 2, "failure", "error[E0308]: mismatched types"],
        ["rust/crates/parser/src/lib.rs", 17, "failure", `test ${escapeTestPath("tests::noisy")} failed`],
      ],
    );
    assert.match(annotations[0]?.message ?? "", /--> crates\/parser\/src\/lib\.rs:2:5/);
    assert.equal(
      annotations[1]?.message,
      `test ${escapeTestPath("tests::noisy")} panicked here: assertion \`left == right\` failed: two is not three`,
    );
  });
});

for (const dialect of DIALECTS) {
  describe(`onboarding without a source-hosting app (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; token: string };
    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
    });
    after(() => t.close());

    it("answers null app fields, counts jobs and names the newest; claims and branch admissions are upstream_failed", async () => {
      const surface = async () =>
        (await t.app.inject({ method: "GET", url: "/api/onboarding", headers: bearer(owner.token) })).json();
      assert.deepEqual(await surface(), {
        installation_active: null,
        install_url: null,
        claim_url: null,
        jobs_total: 0,
        first_job: null,
      });
      const { onboardRepository } = await import("@kiln/storage");
      await onboardRepository(
        t.storage,
        { tenantId: owner.tenant, name: "acme/widget", onboardedBy: "admin" },
        t.clock.now(),
      );
      const submitted = await t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(owner.token), "idempotency-key": "first" },
        payload: inlineSubmission("acme/widget"),
      });
      assert.equal(submitted.statusCode, 200, submitted.body);
      const after = await surface();
      assert.equal(after.jobs_total, 1);
      assert.deepEqual(after.first_job, { id: submitted.json(), repository: "acme/widget" });
      const claim = await t.app.inject({
        method: "POST",
        url: "/api/onboarding/claims",
        headers: { ...bearer(owner.token), "idempotency-key": "claim" },
        payload: { installation_id: 101 },
      });
      assert.equal(claim.statusCode, 502, claim.body);
      assert.equal(claim.json().code, "upstream_failed");
      const admission = await t.app.inject({
        method: "GET",
        url: "/api/repositories/acme/widget/admission?base_ref=main",
        headers: bearer(owner.token),
      });
      assert.equal(admission.json().code, "upstream_failed");
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(owner.token) });
      assert.equal(identity.json().installation_active, null);
    });
  });

  describe(`the GitHub App against the simulator (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let sim: GitHubSimulator;
    let app: GitHubApp;
    let owner: { tenant: string; userId: string; token: string };
    let keys = 0;
    before(async () => {
      sim = await simulator();
      app = appOf(sim);
      ({ t, person: owner } = await appWithTenant(dialect, {
        role: "owner",
        repository: null,
        deps: { gitHubApp: app },
      }));
    });
    after(async () => {
      await t.close();
      await sim.stop();
    });

    const claim = (token: string, installationId: number) =>
      t.app.inject({
        method: "POST",
        url: "/api/onboarding/claims",
        headers: { ...bearer(token), "idempotency-key": `claim-${++keys}` },
        payload: { installation_id: installationId },
      });
    const get = async (url: string, token = owner.token) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(token) });
      return { status: res.statusCode, body: res.json() };
    };
    const submit = async (repository: string, headSha: string) => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(owner.token), "idempotency-key": `job-${++keys}` },
        payload: { ...inlineSubmission(repository), check: { head_sha: headSha } },
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as string;
    };
    const cancel = async (jobId: string) => {
      const res = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${jobId}/cancel`,
        headers: { ...bearer(owner.token), "idempotency-key": `cancel-${++keys}` },
      });
      assert.equal(res.statusCode, 200, res.body);
    };
    const reporter = (events: CheckRunEvent[] = []) =>
      new CheckRunReporter({
        storage: t.storage,
        blobs: t.deps.blobs,
        app,
        clock: t.clock,
        log: silentLogger,
        publicOrigin: "http://kiln.test",
        onEvent: (e) => events.push(e),
      });
    /** Places the oldest queued job; returns its attempt for finish. */
    const start = async () => {
      const protocol = hostProtocolOf(t.deps);
      await protocol.enroll({ id: "local", vcpus: 16, memoryBytes: 2 ** 34, isolation: "sandbox" });
      const placement = await protocol.claim("local", 16);
      assert.ok(placement !== null);
      return { protocol, placement };
    };
    const failWith = async (started: Awaited<ReturnType<typeof start>>, failedTests: number) => {
      const tests = Array.from({ length: failedTests }, (_, i) => ({
        target: "demo (lib)",
        name: `tests::case_${i}`,
        outcome: "failed" as const,
        duration_ms: 1,
      }));
      const output = [
        JSON.stringify({
          reason: "compiler-message",
          message: {
            level: "warning",
            message: "unused import",
            rendered: "warning: unused import",
            spans: [{ file_name: "src/lib.rs", line_start: 1, line_end: 1, is_primary: true }],
          },
        }),
        ...tests.map((test, i) => `thread '${test.name}' panicked at src/lib.rs:${100 + i}:5:`),
      ].join("\n");
      const blob = await started.protocol.putBlob(Buffer.from(output));
      await t.clock.advance(30_000);
      const finished = await started.protocol.finish(started.placement, {
        outcome: "failed",
        exitCode: 101,
        failure: { phase: "test", cause: "test_failure", detail: `${failedTests} tests failed` },
        report: {
          phases: [],
          crates: [],
          tests: [{ target: "demo (lib)", name: "tests::ok", outcome: "passed", duration_ms: 1 }, ...tests],
          unit: null,
          // The crate cache listed first: the summary's cache column is the job's own lineage's.
          caches: [
            {
              lineage: "crate-cache@local",
              class: "dependency-gateway",
              outcome: "warm",
              reason: null,
              restored_bytes: 0,
              saved_bytes: 0,
            },
            {
              lineage: "lin_demo",
              class: "build/dev/stable",
              outcome: "cold",
              reason: "first job of the class",
              restored_bytes: 0,
              saved_bytes: null,
            },
          ],
        },
        cargoOutput: blob,
        lineageSave: null,
        artifacts: [],
      });
      assert.equal(finished, "finished");
    };

    it("offers the installation page and claim route; installation_active is false before a claim", async () => {
      const { body } = await get("/api/onboarding");
      assert.equal(body.installation_active, false);
      assert.equal(body.install_url, `${sim.url}/apps/kiln-test/installations/new`);
      assert.equal(body.claim_url, "http://kiln.test/api/onboarding/claims");
    });

    it("refuses every claim unless unverified claims are allowed: the person's authorization with the provider is not checked", async () => {
      const strict = await testApp(await dialect.openFresh(), { gitHubApp: appOf(sim, false) });
      try {
        const admin = await personWithToken(strict.storage, { role: "owner" });
        const res = await strict.app.inject({
          method: "POST",
          url: "/api/onboarding/claims",
          headers: { ...bearer(admin.token), "idempotency-key": "strict-claim" },
          payload: { installation_id: 101 },
        });
        assert.equal(res.statusCode, 502, res.body);
        assert.equal(res.json().code, "upstream_failed");
        assert.match(res.json().detail, /authorization with the provider/);
        const listed = await strict.app.inject({
          method: "GET",
          url: "/api/repositories",
          headers: bearer(admin.token),
        });
        assert.deepEqual(listed.json().repositories, []);
      } finally {
        await strict.close();
      }
    });

    it("claims an installation: its repositories appear in repositories.list; another tenant's claim is conflict", async () => {
      const unknown = await claim(owner.token, 999);
      assert.equal(unknown.statusCode, 502, unknown.body);
      assert.equal(unknown.json().code, "upstream_failed");
      assert.match(unknown.json().detail, /not an installation of this app/);

      const res = await claim(owner.token, 101);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), { installation_id: 101, tenant: owner.tenant, claimed_by: owner.userId });
      const listed = await get("/api/repositories");
      assert.deepEqual(listed.body.repositories.map((r: { repository: string }) => r.repository).sort(), [
        "acme/gadget",
        "acme/widget",
      ]);
      assert.equal((await get("/api/onboarding")).body.installation_active, true);
      assert.equal((await get("/api/identity")).body.installation_active, true);
      const audit = await get("/api/audit");
      assert.ok(
        audit.body.entries.some((e: { target: string }) => e.target === "installation:101"),
        JSON.stringify(audit.body),
      );

      const again = await claim(owner.token, 101);
      assert.equal(again.statusCode, 200, again.body);

      const rival = await personWithToken(t.storage, { role: "admin" });
      const refused = await claim(rival.token, 101);
      assert.equal(refused.statusCode, 409, refused.body);
      assert.equal(refused.json().code, "conflict");
      assert.match(refused.json().detail, /already claimed by another tenant/);
      assert.deepEqual((await get("/api/repositories", rival.token)).body.repositories, []);

      const member = await personWithToken(t.storage, { role: "member" });
      assert.equal((await claim(member.token, 202)).statusCode, 403);
    });

    it("admission resolves the merge base of a branch against the default branch through the provider", async () => {
      assert.deepEqual((await get("/api/repositories/acme/widget/admission?base_ref=main")).body, { merge_base: MAIN });
      assert.deepEqual((await get("/api/repositories/acme/widget/admission?base_ref=feature")).body, {
        merge_base: ROOT,
      });
      const requests = sim.requests.length;
      assert.deepEqual((await get(`/api/repositories/acme/widget/admission?base_ref=${HEAD}`)).body, {
        merge_base: HEAD,
      });
      assert.equal(sim.requests.length, requests, "a commit id is answered without the provider");
      const missing = await get("/api/repositories/acme/widget/admission?base_ref=nope");
      assert.equal(missing.status, 502);
      assert.equal(missing.body.code, "upstream_failed");
      assert.match(missing.body.detail, /nope/);
      const notOnboarded = await get("/api/repositories/acme/absent/admission?base_ref=main");
      assert.equal(notOnboarded.body.code, "not_found");
    });

    it("reports exactly one `kiln` check run: queued, in_progress, completed with annotations at the panics", async () => {
      const events: CheckRunEvent[] = [];
      const checks = reporter(events);
      const jobId = await submit("acme/widget", HEAD);
      await checks.pass();
      const run = sim.checkRuns.find((r) => r.external_id === jobId);
      assert.ok(run !== undefined);
      assert.equal(run.name, "kiln");
      assert.equal(run.head_sha, HEAD);
      assert.equal(run.status, "queued");
      assert.equal(run.details_url, `http://kiln.test/jobs/${jobId}`);

      const started = await start();
      await checks.pass();
      assert.equal(run.status, "in_progress");
      await failWith(started, 2);
      await checks.pass();
      await checks.pass();
      assert.deepEqual(run.statuses, ["queued", "in_progress", "completed"]);
      assert.equal(run.conclusion, "failure");
      assert.match(run.output.summary ?? "", /\| 1 \| 2 \| 0 \| 30 s \| cold \(first job of the class\) \|/);
      assert.match(run.output.summary ?? "", new RegExp(`/api/jobs/${jobId}/evidence`));
      assert.deepEqual(
        run.annotations.map((a) => [a.path, a.start_line, a.annotation_level]),
        [
          ["src/lib.rs", 1, "warning"],
          ["src/lib.rs", 100, "failure"],
          ["src/lib.rs", 101, "failure"],
        ],
      );
      assert.equal(sim.checkRuns.filter((r) => r.external_id === jobId).length, 1);
      assert.deepEqual((await readCheckRun(t.storage, { jobId }))?.reportedStage, "completed");
      assert.deepEqual(
        events.map((e) => (e.type === "check:reported" ? e.stage : e.type)),
        ["queued", "in_progress", "completed"],
      );
    });

    it("a flaky test is a warning where its failed try panicked, named in the summary; the run succeeds", async () => {
      const checks = reporter();
      const jobId = await submit("acme/widget", HEAD);
      const started = await start();
      // The first run's raw output has the flaky test's panic; the host re-ran it and it passed.
      const blob = await started.protocol.putBlob(Buffer.from("thread 'tests::flaky' panicked at src/lib.rs:40:5:\n"));
      await t.clock.advance(30_000);
      const finished = await started.protocol.finish(started.placement, {
        outcome: "passed",
        exitCode: 0,
        failure: null,
        report: {
          phases: [],
          crates: [],
          tests: [
            { target: "demo (lib)", name: "tests::ok", outcome: "passed", duration_ms: 1 },
            {
              target: "demo (lib)",
              name: "tests::flaky",
              outcome: "passed",
              duration_ms: 2,
              flaky: true,
              tries: [
                {
                  try: 1,
                  outcome: "failed",
                  duration_ms: 2,
                  output: "thread 'tests::flaky' panicked at src/lib.rs:40:5:\nfirst run fails\n",
                },
                { try: 2, outcome: "passed", duration_ms: 2, output: "" },
              ],
            },
          ],
          unit: null,
        } as AttemptReport,
        cargoOutput: blob,
        lineageSave: null,
        artifacts: [],
      });
      assert.equal(finished, "finished");
      await checks.pass();
      await checks.pass();
      await checks.pass();
      const run = sim.checkRuns.find((r) => r.external_id === jobId);
      assert.ok(run !== undefined);
      assert.equal(run.conclusion, "success");
      assert.equal(run.output.title, "passed: 2 tests passed (1 flaky), 0 ignored");
      assert.match(run.output.summary ?? "", /Flaky: 1 test failed, then passed on a re-run: `tests::flaky`\./);
      assert.deepEqual(
        run.annotations.map((a) => [a.path, a.start_line, a.annotation_level, a.title]),
        [["src/lib.rs", 40, "warning", `test ${escapeTestPath("tests::flaky")} is flaky`]],
      );
      assert.match(run.annotations[0]?.message ?? "", /failed here on try 1, then passed on try 2 of 2/);
    });

    it("120 failing tests give 120 panic annotations in 3 requests of at most 50", async () => {
      const checks = reporter();
      const jobId = await submit("acme/widget", HEAD);
      const started = await start();
      await checks.pass();
      await failWith(started, 120);
      const before = sim.requests.length;
      await checks.pass();
      const run = sim.checkRuns.find((r) => r.external_id === jobId);
      assert.ok(run !== undefined);
      assert.equal(run.annotations.filter((a) => a.annotation_level === "failure").length, 120);
      const writes = sim.requests
        .slice(before)
        .filter((r) => r.method === "PATCH" && r.path.endsWith(`/check-runs/${run.id}`));
      assert.equal(writes.length, 3, JSON.stringify(sim.requests.slice(before)));
      assert.ok(writes.every((w) => w.status === 200));
      assert.equal(run.annotations.length, 121);
    });

    it("a provider answering 502 twice, then 201, still yields one check run, each failure reported and retried", async () => {
      const events: CheckRunEvent[] = [];
      const checks = reporter(events);
      const jobId = await submit("acme/widget", HEAD);
      sim.failNext("POST", /\/check-runs$/, { status: 502 }, { status: 502 });
      await checks.pass();
      assert.equal(events.at(-1)?.type, "check:error");
      await checks.pass();
      assert.equal(events.length, 1, "the backoff holds the retry until its time");
      await t.clock.advance(6000);
      await checks.pass();
      assert.equal(events.length, 2);
      const second = events[1];
      assert.ok(second?.type === "check:error" && second.retryAt !== null && !second.abandoned);
      await t.clock.advance(11_000);
      await checks.pass();
      assert.deepEqual(
        events.map((e) => e.type),
        ["check:error", "check:error", "check:reported"],
      );
      assert.equal(sim.checkRuns.filter((r) => r.external_id === jobId).length, 1);
      await cancel(jobId);
    });

    it("a rate-limited answer waits for the provider's Retry-After", async () => {
      const events: CheckRunEvent[] = [];
      const checks = reporter(events);
      const jobId = await submit("acme/widget", HEAD);
      sim.failNext("POST", /\/check-runs$/, { status: 429, headers: { "retry-after": "120" } });
      await checks.pass();
      const failure = events.find((e) => e.jobId === jobId);
      assert.ok(failure?.type === "check:error" && failure.retryAt !== null, JSON.stringify(events));
      assert.equal(failure.retryAt.getTime() - t.clock.now().getTime(), 120_000);
      await t.clock.advance(121_000);
      await checks.pass();
      assert.equal(events.at(-1)?.type, "check:reported");
      await cancel(jobId);
      await checks.pass();
      const run = sim.checkRuns.find((r) => r.external_id === jobId);
      assert.equal(run?.conclusion, "cancelled");
    });

    it("a restarted server completes the check run its predecessor created, and a lost create answer makes no second run", async () => {
      const jobId = await submit("acme/widget", HEAD);
      const started = await start();
      await reporter().pass();
      await failWith(started, 1);
      // A new process: a fresh reporter reads the durable state and completes the same run.
      await reporter().pass();
      const runs = sim.checkRuns.filter((r) => r.external_id === jobId);
      assert.equal(runs.length, 1);
      assert.deepEqual(runs[0]?.statuses, ["in_progress", "completed"]);

      // The provider creates the run but its answer is lost: the next attempt finds it by external id.
      const lost = await submit("acme/widget", HEAD);
      sim.failNext("PATCH", /\/check-runs\/\d+$/, { status: 502 });
      const lostEvents: CheckRunEvent[] = [];
      const checks = reporter(lostEvents);
      await checks.pass();
      const created = sim.checkRuns.find((r) => r.external_id === lost);
      assert.ok(created !== undefined);
      await t.storage.db.updateTable("check_runs").set({ check_run_id: null }).where("job_id", "=", lost).execute();
      await start();
      await checks.pass();
      await t.clock.advance(6000);
      await checks.pass();
      assert.equal(sim.checkRuns.filter((r) => r.external_id === lost).length, 1);
      assert.equal(created.status, "in_progress", JSON.stringify(lostEvents));
    });

    it("a repository no claimed installation covers abandons the check run, reported", async () => {
      const { onboardRepository } = await import("@kiln/storage");
      await onboardRepository(
        t.storage,
        { tenantId: owner.tenant, name: "acme/manual", onboardedBy: "admin" },
        t.clock.now(),
      );
      const events: CheckRunEvent[] = [];
      const jobId = await submit("acme/manual", HEAD);
      await reporter(events).pass();
      const failure = events.find((e) => e.type === "check:error" && e.jobId === jobId);
      assert.ok(failure?.type === "check:error" && failure.abandoned);
      assert.equal((await readCheckRun(t.storage, { jobId }))?.reportedStage, "abandoned");
    });
  });
}
