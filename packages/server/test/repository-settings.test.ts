import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { listAuditEntries, onboardRepository } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { PLATFORM_WALL_CLOCK_SECONDS } from "../src/domain/policy/platform-limits.js";
import { MINIMUM_WALL_CLOCK_CEILING_SECONDS } from "../src/domain/settings/repository-settings-view.js";
import { appWithTenant, bearer, callAs, personWithToken, type TestApp } from "../src/testing/harness.js";
import { inlineFile, inlineSubmission } from "../src/testing/job-fixtures.js";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";

/** A jobs.submit body whose source is `files` (path → text). */
const submission = (files: Record<string, string>, invocation: Record<string, unknown> = {}) =>
  inlineSubmission(
    "acme/widget",
    "test",
    Object.entries({
      "Cargo.toml": '[package]\nname = "widget"\nversion = "0.1.0"\nedition = "2021"\n',
      "src/lib.rs": "pub fn f() {}\n",
      ...files,
    })
      .sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
      .map(([path, text]) => inlineFile(path, text)),
    { size: "kiln4-cpu", invocation },
  );

for (const dialect of DIALECTS) {
  describe(`repository settings, admission and snapshots (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let admin: { tenant: string; userId: string; token: string };
    let member: { token: string };

    before(async () => {
      ({ t, person: admin } = await appWithTenant(dialect, { role: "admin", repository: null }));
      member = await personWithToken(t.storage, { tenant: admin.tenant, role: "member" });
      await onboardRepository(
        t.storage,
        { tenantId: admin.tenant, name: "acme/widget", onboardedBy: admin.userId },
        t.clock.now(),
      );
    });
    after(() => t.close());

    const call = (method: "GET" | "POST", url: string, body?: unknown, token = admin.token) =>
      callAs(t, token, method, url, body);
    const settings = () => call("GET", "/api/repositories/acme/widget/settings");
    const write = (version: number, changes: Record<string, unknown>) =>
      call("POST", "/api/repositories/acme/widget/settings", { version, changes });
    const evidenceOf = async (body: unknown) => {
      const submitted = await call("POST", "/api/v4/jobs", body, member.token);
      assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
      const job = await t.app.inject({
        method: "GET",
        url: `/api/jobs/${submitted.body}`,
        headers: bearer(admin.token),
      });
      assert.equal(job.statusCode, 200);
      const row = await t.storage.db
        .selectFrom("jobs")
        .select(["admitted", "wall_clock_seconds"])
        .where("id", "=", submitted.body)
        .executeTakeFirstOrThrow();
      return { admitted: JSON.parse(row.admitted ?? "null"), wallClockSeconds: row.wall_clock_seconds };
    };

    it("reads version 0 of a never-written repository: platform defaults and the onboarding as last change", async () => {
      const res = await settings();
      assert.equal(res.status, 200);
      const s = res.body;
      assert.equal(s.version, 0);
      assert.equal(s.changed_by, admin.userId);
      assert.equal(s.affected_tests, false);
      assert.equal(s.total_injection_opt_out, false);
      assert.equal(s.total_injection_opt_out_origin, "platform default");
      assert.equal(s.wall_clock_ceiling_seconds, PLATFORM_WALL_CLOCK_SECONDS);
      assert.equal(s.platform_default_wall_clock_ceiling_seconds, PLATFORM_WALL_CLOCK_SECONDS);
      assert.equal(s.minimum_wall_clock_ceiling_seconds, MINIMUM_WALL_CLOCK_CEILING_SECONDS);
      assert.equal(s.wall_clock_ceiling_origin, "platform default");
      assert.deepEqual(
        s.injected.map((i: { name: string; status: string }) => [i.name, i.status]),
        [
          ["build.jobs", "applied"],
          ["profile.dev.debug", "applied"],
        ],
      );
      assert.match(s.effective, /next admitted job/);
      assert.equal((await call("GET", "/api/repositories/acme/nowhere/settings")).body.code, "not_found");
    });

    it("writes at the observed version; a moved-past version is stale_version naming the current one", async () => {
      const first = await write(0, { wall_clock_ceiling_seconds: 600, total_injection_opt_out: false });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.deepEqual(
        { ...first.body, changed_at: "…" },
        {
          target: "repository:acme/widget",
          version: 1,
          changed_by: admin.userId,
          changed_at: "…",
          effective: first.body.effective,
          not_applied: [],
        },
      );
      const stale = await write(0, { affected_tests: true });
      assert.equal(stale.status, 409);
      assert.equal(stale.body.code, "stale_version");
      assert.equal(stale.body.current_version, 1);
      const s = (await settings()).body;
      assert.equal(s.version, 1);
      assert.equal(s.wall_clock_ceiling_seconds, 600);
      assert.equal(s.wall_clock_ceiling_origin, "dashboard repository setting");
      assert.equal(s.total_injection_opt_out_origin, "dashboard repository setting");
      assert.equal(s.affected_tests, false, "the stale write changed nothing");
      const audit = await listAuditEntries(t.storage, { tenantId: admin.tenant, limit: 50 });
      assert.ok(
        audit.entries.some((e) => e.target === "repository-settings:acme/widget" && e.actor === admin.userId),
        "the write is attributed in the audit trail",
      );
    });

    it("refuses a ceiling outside the bounds, a name the repository does not accept, and a member", async () => {
      for (const seconds of [MINIMUM_WALL_CLOCK_CEILING_SECONDS - 1, PLATFORM_WALL_CLOCK_SECONDS + 1]) {
        const res = await write(1, { wall_clock_ceiling_seconds: seconds });
        assert.equal(res.body.code, "invalid_request", JSON.stringify(res.body));
        assert.match(res.body.detail, /wall_clock_ceiling_seconds must be between 60 and 3600/);
      }
      const tenantName = await write(1, { default_size: "kiln8-cpu" });
      assert.equal(tenantName.body.code, "invalid_request");
      assert.match(tenantName.body.detail, /default_size is not a repository setting/);
      const byMember = await call(
        "POST",
        "/api/repositories/acme/widget/settings",
        { version: 1, changes: { affected_tests: true } },
        member.token,
      );
      assert.equal(byMember.body.code, "out_of_scope");
      assert.equal((await settings()).body.version, 1, "nothing was written");
    });

    it("snapshots settings at admission: the job keeps them when the repository's change later", async () => {
      const before = await evidenceOf(submission({}));
      assert.equal(before.wallClockSeconds, 600);
      assert.deepEqual(before.admitted.wall_clock_ceiling, { seconds: 600, origin: "dashboard repository setting" });
      assert.equal(before.admitted.settings_version, 1);
      assert.deepEqual(
        before.admitted.injections.map((i: { setting: string; status: string; environment: unknown }) => [
          i.setting,
          i.status,
          i.environment,
        ]),
        [
          ["build.jobs", "applied", { name: "CARGO_BUILD_JOBS", value: "4" }],
          ["profile.dev.debug", "applied", { name: "CARGO_PROFILE_DEV_DEBUG", value: "line-tables-only" }],
        ],
      );
      assert.equal((await write(1, { total_injection_opt_out: true })).status, 200);
      const after = await evidenceOf(submission({ "src/extra.rs": "" }));
      assert.equal(after.admitted.settings_version, 2);
      assert.ok(
        after.admitted.injections.every(
          (i: { status: string; detail: string }) =>
            i.status === "not applied" && /total_injection_opt_out/.test(i.detail),
        ),
      );
      const row = await t.storage.db
        .selectFrom("jobs")
        .select("admitted")
        .orderBy("accepted_at")
        .executeTakeFirstOrThrow();
      assert.equal(JSON.parse(row.admitted ?? "null").settings_version, 1, "the earlier job kept its snapshot");
      assert.equal((await write(2, { total_injection_opt_out: false })).status, 200);
    });

    it("never replaces what the repository's own Cargo configuration, environment or arguments set", async () => {
      const statusOf = async (files: Record<string, string>, invocation: Record<string, unknown> = {}) => {
        const { admitted } = await evidenceOf(submission(files, invocation));
        return Object.fromEntries(
          admitted.injections.map((i: { setting: string; status: string; detail: string }) => [
            i.setting,
            `${i.status}: ${i.detail}`,
          ]),
        );
      };
      const config = await statusOf({ ".cargo/config.toml": "[build]\njobs = 1\n" });
      assert.match(config["build.jobs"], /^not applied: the repository's \.cargo\/config\.toml sets build\.jobs/);
      assert.match(config["profile.dev.debug"], /^applied/);
      const manifest = await statusOf({
        "Cargo.toml": '[package]\nname = "widget"\nversion = "0.1.0"\n\n[profile.dev]\ndebug = 2\n',
      });
      assert.match(manifest["profile.dev.debug"], /^not applied: the repository's Cargo.toml sets profile\.dev\.debug/);
      const testProfile = await statusOf({
        "Cargo.toml": '[package]\nname = "widget"\nversion = "0.1.0"\n\n[profile.test]\ndebug = 0\n',
      });
      assert.match(testProfile["profile.dev.debug"], /^not applied: .*profile\.test\.debug/);
      const environment = await statusOf({}, { environment: { CARGO_BUILD_JOBS: "3" } });
      assert.match(environment["build.jobs"], /^not applied: the invocation's environment sets CARGO_BUILD_JOBS/);
      const argument = await statusOf({}, { arguments: ["-j", "3"] });
      assert.match(argument["build.jobs"], /^not applied: the invocation's argument -j sets it/);
      const release = await statusOf({}, { arguments: ["--release"] });
      assert.match(release["profile.dev.debug"], /^not applied: the job builds the `release` profile/);
      const nested = await statusOf(
        { "crates/a/.cargo/config": "[build]\njobs = 2\n" },
        { working_directory: "crates/a" },
      );
      assert.match(nested["build.jobs"], /^not applied: the repository's crates\/a\/\.cargo\/config sets build\.jobs/);
      const unreadable = await statusOf({ ".cargo/config.toml": "[build\njobs = " });
      assert.match(unreadable["build.jobs"], /^not applied: \.cargo\/config\.toml could not be read/);
    });

    it("honours a ceiling the source pins, within the bounds; refuses one outside them", async () => {
      const pinned = await evidenceOf(
        submission({
          "Cargo.toml":
            '[package]\nname = "widget"\nversion = "0.1.0"\n\n[package.metadata.kiln]\nwall_clock_ceiling_seconds = 120\n',
        }),
      );
      assert.deepEqual(pinned.admitted.wall_clock_ceiling, { seconds: 120, origin: "repository configuration" });
      assert.equal(pinned.wallClockSeconds, 120);
      const refused = await call(
        "POST",
        "/api/v4/jobs",
        submission({
          "Cargo.toml":
            '[package]\nname = "widget"\nversion = "0.1.0"\n\n[workspace.metadata.kiln]\nwall_clock_ceiling_seconds = 99999\n',
        }),
        member.token,
      );
      assert.equal(refused.body.code, "invalid_request");
      assert.match(
        refused.body.detail,
        /Cargo\.toml \[workspace\.metadata\.kiln\] wall_clock_ceiling_seconds must be an integer between 60 and 3600/,
      );
    });

    it("admission: confirms onboarding and resolves a commit id; a branch needs the provider", async () => {
      const resolved = await call(
        "GET",
        `/api/repositories/acme/widget/admission?base_ref=${COMMIT}`,
        undefined,
        member.token,
      );
      assert.deepEqual(resolved, { status: 200, body: { merge_base: COMMIT } });
      const branch = await call(
        "GET",
        "/api/repositories/acme/widget/admission?base_ref=main",
        undefined,
        member.token,
      );
      assert.equal(branch.body.code, "upstream_failed");
      assert.match(branch.body.detail, /source-hosting provider/);
      const elsewhere = await call(
        "GET",
        `/api/repositories/acme/other/admission?base_ref=${COMMIT}`,
        undefined,
        member.token,
      );
      assert.equal(elsewhere.body.code, "not_found");
    });

    it("flaky_retries and flaky_policy (issue 37): defaults 2 and pass, versioned, refused outside their ranges, snapshotted at admission", async () => {
      const defaults = await evidenceOf(submission({ "src/flaky0.rs": "" }));
      assert.equal(defaults.admitted.flaky_retries, 2);
      assert.equal(defaults.admitted.flaky_policy, "pass");
      assert.match(
        (await settings()).body.effective,
        /flaky_retries 2 \(platform default\), flaky_policy pass \(platform default\)/,
      );
      const version = (await settings()).body.version;
      for (const changes of [
        { flaky_retries: 6 },
        { flaky_retries: -1 },
        { flaky_retries: 1.5 },
        { flaky_policy: "maybe" },
      ]) {
        const refused = await write(version, changes);
        assert.equal(refused.body.code, "invalid_request", JSON.stringify(changes));
      }
      assert.equal((await settings()).body.version, version, "nothing was written");
      const written = await write(version, { flaky_retries: 0, flaky_policy: "fail" });
      assert.equal(written.status, 200, JSON.stringify(written.body));
      assert.match(
        (await settings()).body.effective,
        /flaky_retries 0 \(dashboard repository setting\), flaky_policy fail/,
      );
      const after = await evidenceOf(submission({ "src/flaky1.rs": "" }));
      assert.equal(after.admitted.flaky_retries, 0);
      assert.equal(after.admitted.flaky_policy, "fail");
      assert.equal(after.admitted.settings_version, version + 1);
      const tenantWrite = await call("POST", "/api/tenant/settings", { version: 0, changes: { flaky_retries: 1 } });
      assert.equal(tenantWrite.body.code, "invalid_request", "a repository setting, not a tenant one");
    });
  });
}
