import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { CLI_DIALECTS, freshConfigHome, runCli, serverTesting } from "./harness.js";

/**
 * `kiln tests` (repositories.tests) and the summary's flaky lines, against a real server holding
 * five test jobs whose evidence is in issue 37's agreed shape (server test-history-fixtures.ts).
 */
for (const dialect of CLI_DIALECTS) {
  describe(`kiln tests and the flaky summary against a real server (${dialect.name})`, { skip: dialect.skip }, () => {
    let close: () => Promise<void>;
    let env: Record<string, string>;
    let jobs: string[];

    before(async () => {
      const { appWithTenant, runFiveTestJobs } = await serverTesting();
      const { t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: "acme/widget" });
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      close = t.close;
      jobs = await runFiveTestJobs(t, owner.token, "acme/widget");
      const endpoint = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
      env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: owner.token };
    });
    after(() => close());

    it("kiln tests owner/name prints the flakiest, the newly failing and the slowest tests", async () => {
      const run = await runCli(["tests", "acme/widget"], { env });
      assert.equal(run.code, 0, run.stderr);
      const [, flakiest = "", failing = "", slowest = ""] = run.stdout.split(/\n\n/);
      assert.match(run.stdout, /^acme\/widget: tests over the last 5 test jobs/);
      assert.match(flakiest, /^flakiest/);
      assert.match(flakiest, /widget \(lib\): net::retries_on_reset +5 +2 \(40%\)/);
      assert.match(flakiest, /PfPfP/, "its outcomes, old to new: flaky in jobs 2 and 4");
      assert.doesNotMatch(flakiest, /large_input|roundtrip/);
      assert.match(failing, /^newly failing/);
      assert.match(failing, /widget::store: store::roundtrip .*PPPPF/);
      assert.match(slowest, /^slowest/);
      const rows = slowest.split("\n").filter((line) => line.startsWith("widget"));
      assert.match(rows[0] ?? "", /parse::large_input +5 +- +120 ms +280 ms +slower \(×2\.60\)/);
    });

    it("--sort gives one page of that order; --json the TestHistoryPage", async () => {
      const run = await runCli(["tests", "acme/widget", "--sort", "name", "--limit", "2", "--json"], { env });
      assert.equal(run.code, 0, run.stderr);
      const page = JSON.parse(run.stdout);
      assert.deepEqual(
        page.tests.map((t: { name: string }) => t.name),
        ["net::retries_on_reset", "parse::large_input"],
      );
      assert.equal(typeof page.next_cursor, "string");
      const rest = await runCli(["tests", "acme/widget", "--sort", "name", "--json", "--cursor", page.next_cursor], {
        env,
      });
      assert.deepEqual(
        JSON.parse(rest.stdout).tests.map((t: { name: string }) => t.name),
        ["store::roundtrip"],
      );
    });

    it("a repository the tenant has not onboarded is refused, naming how to onboard it", async () => {
      const run = await runCli(["tests", "acme/nothing"], { env });
      assert.equal(run.code, 2, run.stdout);
      assert.match(run.stderr, /refused \(not_found\): repository acme\/nothing is not onboarded/);
      const bad = await runCli(["tests", "acme/widget", "--window", "500"], { env });
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--window must be a whole number from 1 to 100/);
    });

    it("a job's summary names its flaky test apart from the failures: flaky: 1 (passed on try 2)", async () => {
      const flakyJob = await runCli(["jobs", "evidence", jobs[3] ?? ""], { env });
      assert.equal(flakyJob.code, 0, flakyJob.stderr);
      assert.match(flakyJob.stdout, /^flaky: 1 \(passed on try 2\)$/m);
      assert.match(flakyJob.stdout, /^ {2}flaky: widget \(lib\): net::retries_on_reset \(passed on try 2 of 2\)$/m);
      assert.doesNotMatch(flakyJob.stdout, /failed: /);
      assert.match(flakyJob.stdout, /tests total: 3 passed; 0 failed; 0 ignored/);
      const cleanJob = await runCli(["jobs", "evidence", jobs[2] ?? ""], { env });
      assert.doesNotMatch(cleanJob.stdout, /flaky/);
      const failedJob = await runCli(["jobs", "evidence", jobs[4] ?? ""], { env });
      assert.match(failedJob.stdout, /^ {2}failed: widget::store: store::roundtrip$/m);
      assert.doesNotMatch(failedJob.stdout, /flaky/);
    });
  });
}
