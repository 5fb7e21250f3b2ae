import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { runFiveTestJobs } from "../src/testing/test-history-fixtures.js";

/**
 * repositories.tests (issue 37, a kiln extension): five test jobs submitted through the API and
 * finished through the host protocol, their evidence in the agreed issue-37 shape (a flaky test
 * passes with `flaky: true` and its tries), read back as the repository's history: flaky rate,
 * duration percentiles and trend, paged; another tenant's repository refused exactly as one
 * that does not exist. Every response is checked against the catalogue's schema (testApp).
 */

for (const dialect of DIALECTS) {
  describe(`repositories.tests: a repository's test history (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; userId: string; token: string };
    let stranger: { tenant: string; token: string };
    const jobs: string[] = [];

    const get = async (url: string, token = owner.token) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(token) });
      return { status: res.statusCode, body: res.json() };
    };

    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner" }));
      stranger = await personWithToken(t.storage, { role: "owner" });
      jobs.push(...(await runFiveTestJobs(t, owner.token, "acme/widget")));
    });
    after(() => t.close());

    it("after five jobs: each test's flaky rate, recent outcomes with job ids, percentiles and trend", async () => {
      const res = await get("/api/repositories/acme/widget/tests");
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.window.jobs, 5);
      assert.equal(res.body.sort, "name");
      const byName = new Map(res.body.tests.map((test: { name: string }) => [test.name, test]));
      const flaky = byName.get("net::retries_on_reset") as Record<string, unknown>;
      assert.equal(flaky.runs, 5);
      assert.equal(flaky.flaky, 2);
      assert.equal(flaky.flaky_rate, 0.4);
      assert.deepEqual(
        (flaky.recent as { job: string; outcome: string }[]).map((r) => [r.job, r.outcome]),
        [...jobs].reverse().map((job, i) => [job, i === 1 || i === 3 ? "flaky" : "passed"]),
      );
      const slow = byName.get("parse::large_input") as Record<string, unknown>;
      assert.deepEqual(slow.duration_ms, { p50: 120, p90: 280 });
      assert.deepEqual(slow.trend, { earlier_p50_ms: 100, recent_p50_ms: 260, ratio: 2.6, direction: "slower" });
      const store = byName.get("store::roundtrip") as Record<string, unknown>;
      assert.equal(store.latest_outcome, "failed");
      assert.equal(store.newly_failing, true);
      assert.equal((byName.get("net::retries_on_reset") as Record<string, unknown>).newly_failing, false);
    });

    it("sorts: flakiest keeps the flaky, slowest leads with the slow one, newly_failing the one that broke", async () => {
      const flakiest = await get("/api/repositories/acme/widget/tests?sort=flakiest");
      assert.deepEqual(
        flakiest.body.tests.map((test: { name: string }) => test.name),
        ["net::retries_on_reset"],
      );
      const slowest = await get("/api/repositories/acme/widget/tests?sort=slowest");
      assert.equal(slowest.body.tests[0].name, "parse::large_input");
      const failing = await get("/api/repositories/acme/widget/tests?sort=newly_failing");
      assert.deepEqual(
        failing.body.tests.map((test: { name: string; recent: { job: string }[] }) => [test.name, test.recent[0]?.job]),
        [["store::roundtrip", jobs[4]]],
      );
      const window = await get("/api/repositories/acme/widget/tests?sort=flakiest&window=1");
      assert.equal(window.body.window.jobs, 1);
      assert.deepEqual(window.body.tests, []);
    });

    it("pages with the spec's pagination: limit and next_cursor walk every test once", async () => {
      const names: string[] = [];
      let url = "/api/repositories/acme/widget/tests?limit=2";
      for (;;) {
        const page = await get(url);
        assert.equal(page.status, 200);
        names.push(...page.body.tests.map((test: { name: string }) => test.name));
        if (page.body.next_cursor === null) break;
        url = `/api/repositories/acme/widget/tests?limit=2&cursor=${page.body.next_cursor}`;
      }
      assert.deepEqual(names, ["net::retries_on_reset", "parse::large_input", "store::roundtrip"]);
      const bad = await get("/api/repositories/acme/widget/tests?cursor=not-a-cursor");
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, "invalid_request");
      const wide = await get("/api/repositories/acme/widget/tests?window=101");
      assert.equal(wide.status, 400);
      assert.equal(wide.body.code, "invalid_request");
    });

    it("jobs.evidence carries issue 37's members per attempt: flaky tries, binaries' wall time, retries, timeline", async () => {
      const res = await get(`/api/jobs/${jobs[3]}/evidence`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const report = res.body.report;
      const flaky = report.tests.find((test: { name: string }) => test.name === "net::retries_on_reset");
      assert.equal(flaky.flaky, true);
      assert.deepEqual(
        flaky.tries.map((x: { try: number; outcome: string }) => [x.try, x.outcome]),
        [
          [1, "failed"],
          [2, "passed"],
        ],
      );
      assert.deepEqual(
        report.test_binaries.map((b: { attempt: number; target: string }) => [b.attempt, b.target]),
        [
          [1, "widget (lib)"],
          [1, "widget::store"],
        ],
      );
      assert.equal(report.retries.flaky, 1);
      assert.equal(report.timeline.length, 1);
      assert.equal(report.timeline[0].attempt, 1);
      assert.equal(report.timeline[0].critical_path_share, 0.889);
    });

    it("another tenant's repository is refused exactly as one that does not exist", async () => {
      const theirs = await get("/api/repositories/acme/widget/tests", stranger.token);
      const none = await get("/api/repositories/acme/nothing/tests", stranger.token);
      assert.equal(theirs.status, 404);
      assert.equal(none.status, 404);
      assert.equal(theirs.body.code, "not_found");
      assert.deepEqual(
        { ...theirs.body, detail: theirs.body.detail.replaceAll("acme/widget", "X") },
        { ...none.body, detail: none.body.detail.replaceAll("acme/nothing", "X") },
      );
      assert.equal(JSON.stringify(theirs.body).includes("retries_on_reset"), false);
    });
  });
}
