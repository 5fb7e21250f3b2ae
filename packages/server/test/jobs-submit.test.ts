import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { readJobManifest } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { inlineFile, inlineSubmission } from "../src/testing/job-fixtures.js";

export function submission(
  overrides: Record<string, unknown> = {},
  files = [
    inlineFile("Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n'),
    inlineFile("src/lib.rs", "pub fn f() {}\n"),
  ],
) {
  return {
    ...inlineSubmission("acme/widget", "test", files, { invocation: { arguments: ["--workspace"] } }),
    ...overrides,
  };
}

for (const dialect of DIALECTS) {
  describe(`jobs.submit and the job lifecycle without a host (${dialect.name})`, () => {
    let t: TestApp;
    let member: { tenant: string; userId: string; token: string };
    before(async () => {
      ({ t, person: member } = await appWithTenant(dialect, { role: "member" }));
    });
    after(() => t.close());

    const submit = (body: unknown, key: string, token = member.token) =>
      t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
        payload: JSON.stringify(body),
      });

    it("accepts a workspace, queues it, and the key is the durable submission identity", async () => {
      const first = await submit(submission(), "sub-1");
      assert.equal(first.statusCode, 200, first.body);
      const id = first.json() as string;
      assert.match(id, /^job_/);
      await t.clock.advance(3 * 86400 * 1000); // long past the 24-hour receipt window: still the same job
      const replay = await submit(submission(), "sub-1");
      assert.equal(replay.json(), id);
      const changed = await submit(submission({ size: "kiln4-cpu" }), "sub-1");
      assert.equal(changed.statusCode, 409);
      assert.equal(changed.json().code, "conflict");

      const job = (await t.app.inject({ method: "GET", url: `/api/jobs/${id}`, headers: bearer(member.token) })).json();
      assert.equal(job.status, "queued");
      assert.equal(job.repo, "acme/widget");
      assert.equal(job.description, "cargo test --workspace");
      assert.equal(job.class, "build/dev/stable");
      assert.deepEqual(
        job.transitions.map((x: { to: string }) => x.to),
        ["queued"],
      );
    });

    it("refuses what the spec refuses, naming the problem", async () => {
      const cases: [unknown, number, string, RegExp][] = [
        [submission({ repository: "acme/not-onboarded" }), 404, "not_found", /not onboarded/],
        [submission({ size: "kiln3-cpu" }), 400, "invalid_request", /body\.size/],
        [submission({ check: { head_sha: "ABC" } }), 400, "invalid_request", /head_sha/],
        [submission({ schema_version: 2 }), 400, "invalid_request", /schema_version/],
        [submission({}, [inlineFile("/etc/passwd", "x")]), 400, "invalid_request", /files\[0\]\.path/],
        [submission({}, [inlineFile("a/../b", "x")]), 400, "invalid_request", /files\[0\]\.path/],
        [submission({}, [inlineFile("a/./b", "x")]), 400, "invalid_request", /files\[0\]\.path/],
        [submission({}, [inlineFile("b", "x"), inlineFile("a", "y")]), 400, "invalid_request", /out of order/],
        [submission({}, [inlineFile("a", "x"), inlineFile("a", "y")]), 400, "invalid_request", /duplicates/],
        [submission({}, [inlineFile("a", "x"), inlineFile("a/b", "y")]), 400, "invalid_request", /which is a file/],
        [submission({}, [{ path: "a", bytes: [256], executable: false }]), 400, "invalid_request", /bytes\[0\]/],
        [
          submission({ workspace: { ...submission().workspace, invocation: { operation: "run", arguments: [] } } }),
          400,
          "invalid_request",
          /operation/,
        ],
        [
          submission({
            workspace: {
              ...submission().workspace,
              invocation: { operation: "build", arguments: ["--target-dir", "/tmp"] },
            },
          }),
          400,
          "invalid_request",
          /arguments\[0\]/,
        ],
        [
          submission({
            workspace: {
              ...submission().workspace,
              invocation: { operation: "build", arguments: [], environment: { LD_PRELOAD: "x" } },
            },
          }),
          400,
          "invalid_request",
          /environment\.LD_PRELOAD/,
        ],
        // Where the workspace lives in its git repository is prefixed to check-run annotation
        // paths (a kiln extension): a canonical repository path, never out of the repository.
        ...["../outside", "/etc", "rust/./src", ""].map((directory): [unknown, number, string, RegExp] => [
          submission({
            workspace: {
              ...submission().workspace,
              invocation: { operation: "build", arguments: [], repository_directory: directory },
            },
          }),
          400,
          "invalid_request",
          /repository_directory/,
        ]),
      ];
      let n = 0;
      for (const [body, status, code, detail] of cases) {
        const res = await submit(body, `bad-${n++}`);
        assert.equal(res.statusCode, status, `${n}: ${res.body}`);
        assert.equal(res.json().code, code, res.body);
        assert.match(res.json().detail, detail, res.body);
      }
    });

    it("honours rust-toolchain.toml and reports it as the origin; executable bits are kept", async () => {
      const files = [
        inlineFile("Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\n'),
        inlineFile("run.sh", "#!/bin/sh\n", true),
        inlineFile("rust-toolchain.toml", '[toolchain]\nchannel = "nightly"\n'),
      ];
      const res = await submit(submission({}, files), "pinned");
      assert.equal(res.statusCode, 200, res.body);
      const row = await t.storage.db
        .selectFrom("jobs")
        .selectAll()
        .where("id", "=", res.json())
        .executeTakeFirstOrThrow();
      const { injections, ...admitted } = JSON.parse(row.admitted ?? "{}");
      assert.deepEqual(admitted, {
        toolchain: "nightly",
        toolchain_origin: "rust-toolchain-file",
        network_policy: "offline",
        network_policy_reason: "no dependencies outside the workspace",
        configuration_sha256: null,
        settings_version: 0,
        wall_clock_ceiling: { seconds: 3600, origin: "platform default" },
        affected_tests: false,
        lineage_seeding: true,
        flaky_retries: 2,
        flaky_policy: "pass",
      });
      assert.deepEqual(
        injections.map((i: { setting: string; status: string }) => `${i.setting} ${i.status}`),
        ["build.jobs applied", "profile.dev.debug applied"],
      );
      assert.equal(row.class, "build/dev/nightly");
      const manifest = JSON.parse((await readJobManifest(t.storage, row.id)) ?? "null") as {
        path: string;
        executable: boolean;
        sha256: string;
      }[];
      assert.deepEqual(
        manifest.map((m) => [m.path, m.executable]),
        [
          ["Cargo.toml", false],
          ["run.sh", true],
          ["rust-toolchain.toml", false],
        ],
      );
      assert.equal((await t.deps.blobs.get(manifest[1]?.sha256 ?? "")).toString(), "#!/bin/sh\n");
    });

    it("a job cancelled before placement settles with no attempt and no usage; a terminal job can be retried, a queued one not", async () => {
      const id = (await submit(submission(), "to-cancel")).json() as string;
      const retryEarly = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${id}/retry`,
        headers: { ...bearer(member.token), "idempotency-key": "r0" },
      });
      assert.equal(retryEarly.statusCode, 409);
      const cancel = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${id}/cancel`,
        headers: { ...bearer(member.token), "idempotency-key": "c1" },
      });
      assert.equal(cancel.statusCode, 200, cancel.body);
      assert.deepEqual(cancel.json(), { job: id, state: "cancellation_requested", requested_by: member.userId });
      const job = (await t.app.inject({ method: "GET", url: `/api/jobs/${id}`, headers: bearer(member.token) })).json();
      assert.equal(job.status, "cancelled");
      assert.equal(job.failure.cause, "cancelled");
      const row = await t.storage.db.selectFrom("jobs").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
      assert.equal(row.usage, null);
      assert.deepEqual(JSON.parse(row.settlement ?? "{}").attempts, 0);
      assert.equal(JSON.parse(row.settlement ?? "{}").usage_recorded, false);
      const again = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${id}/cancel`,
        headers: { ...bearer(member.token), "idempotency-key": "c2" },
      });
      assert.equal(again.statusCode, 409);
      assert.equal(again.json().code, "conflict");
      const retry = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${id}/retry`,
        headers: { ...bearer(member.token), "idempotency-key": "r1" },
      });
      assert.equal(retry.statusCode, 200, retry.body);
      assert.equal(retry.json().original, id);
      const fresh = (
        await t.app.inject({ method: "GET", url: `/api/jobs/${retry.json().retry}`, headers: bearer(member.token) })
      ).json();
      assert.equal(fresh.retry_of, id);
      assert.equal(fresh.status, "queued");
      // The same source: the original's manifest, copied for the retry (a host places it from there).
      const original = await readJobManifest(t.storage, id);
      assert.ok(original !== undefined && original !== "[]");
      assert.equal(await readJobManifest(t.storage, retry.json().retry), original);
    });

    it("jobs.list: newest first, filters, summary and total", async () => {
      const page = (
        await t.app.inject({ method: "GET", url: "/api/jobs?limit=2", headers: bearer(member.token) })
      ).json();
      assert.equal(page.jobs.length, 2);
      assert.ok(page.jobs[0].accepted_at >= page.jobs[1].accepted_at);
      assert.equal(page.total, page.summary.queued + page.summary.running + page.summary.passed + page.summary.failed);
      const cancelled = (
        await t.app.inject({ method: "GET", url: "/api/jobs?status=cancelled", headers: bearer(member.token) })
      ).json();
      assert.ok(cancelled.jobs.every((j: { status: string }) => j.status === "cancelled"));
      assert.ok(cancelled.jobs.length >= 1);
    });

    it("another tenant's job is not found", async () => {
      const id = (await submit(submission(), "mine")).json() as string;
      const other = await personWithToken(t.storage, { role: "owner" });
      const res = await t.app.inject({ method: "GET", url: `/api/jobs/${id}`, headers: bearer(other.token) });
      assert.equal(res.statusCode, 404);
    });
  });
}
