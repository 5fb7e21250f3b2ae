import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildApp } from "@kiln/server";
import type { TestApp } from "@kiln/server/testing";
import { createTenant, registerHost } from "@kiln/storage";
import type { FastifyInstance } from "fastify";
import { CLI_DIALECTS, type CliRun, freshConfigHome, runCli, serverTesting } from "./harness.js";

/** The operation this test's server leaves without a handler, so it answers 501 not_implemented. */
const UNIMPLEMENTED = "operator.platform.states";

interface HostView {
  host: string;
  state: string;
  revision: number;
  last_attribution: { action: string } | null;
}

/**
 * The `kiln` bin's operator commands against the real app on real storage: an operator session
 * opened with the bootstrap credential from the environment or a file, reads and audited
 * mutations through derived commands, refusals as Refusal documents with a non-zero exit, and
 * the credential never shown.
 */
for (const dialect of CLI_DIALECTS) {
  describe(`kiln operator against a real server (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let app: FastifyInstance;
    let endpoint: string;
    let credential: string;
    let env: Record<string, string>;
    /** The cookie of one operator session the test reads through, opened once (its own audit entry). */
    let referenceCookie: string;
    const runs: { args: string[]; run: CliRun }[] = [];
    const tenant = "acme-ops";

    const kiln = async (args: string[], extraEnv: Record<string, string> = env): Promise<CliRun> => {
      const run = await runCli(["operator", ...args], { env: extraEnv });
      runs.push({ args, run });
      return run;
    };
    /** What the operator API answers, read directly (not through the CLI or the client). */
    const api = async (path: string): Promise<unknown> => {
      const response = await fetch(new URL(path, endpoint), { headers: { cookie: referenceCookie } });
      assert.equal(response.status, 200, path);
      return response.json();
    };

    before(async () => {
      const { testApp, defaultHandlers, masterKey, operatorCredential } = await serverTesting();
      t = await testApp(await dialect.openFresh());
      for (const id of ["local", "builder-1", "builder-2"]) {
        await registerHost(t.storage, { id, vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: t.clock.now() });
      }
      await createTenant(t.storage, { id: tenant }, t.clock.now());
      credential = await operatorCredential(
        t.storage,
        masterKey(mkdtempSync(join(tmpdir(), "kiln-key-"))),
        false,
        t.clock.now(),
      );
      // The same app and storage, with one operator operation left unimplemented on purpose.
      const { [UNIMPLEMENTED]: _left, ...handlers } = defaultHandlers;
      app = buildApp(t.deps, handlers);
      await app.listen({ host: "127.0.0.1", port: 0 });
      endpoint = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      env = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_OPERATOR_CREDENTIAL: credential };
      const opened = await fetch(new URL("/operator/auth/session", endpoint), {
        method: "POST",
        headers: { authorization: `Bearer ${credential}` },
      });
      assert.equal(opened.status, 204);
      referenceCookie = opened.headers.getSetCookie()[0]?.split(";")[0] ?? "";
      assert.match(referenceCookie, /^kiln_operator_session=./);
    });
    after(async () => {
      await app.close();
      await t.close();
    });

    it("hosts list: --json is the API's answer; the default is a table", async () => {
      const json = await kiln(["hosts", "list", "--json"]);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), await api("/operator/api/hosts"));
      assert.deepEqual(
        (JSON.parse(json.stdout) as HostView[]).map((h) => h.host),
        ["builder-1", "builder-2", "local"],
      );

      const text = await kiln(["hosts", "list"]);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /^HOST\s+STATE\s+REVISION\s+DEPLOYED_RELEASE\s+LAST_ATTRIBUTION(\s|$)/m);
      assert.match(text.stdout, /^builder-1\s+serving\s+0\s+-\s+-(\s|$)/m);
    });

    it("drain, then undrain under the policy revision read; both are in the operator audit", async () => {
      const drained = await kiln(["hosts", "drain", "builder-1", "--json"]);
      assert.equal(drained.code, 0, drained.stderr);
      const view = JSON.parse(drained.stdout) as HostView;
      assert.equal(view.state, "drained");
      assert.equal(view.last_attribution?.action, "operator.hosts.drain");
      assert.deepEqual(
        await api("/operator/api/hosts/builder-1"),
        JSON.parse((await kiln(["hosts", "get", "builder-1", "--json"])).stdout),
      );

      const stale = await kiln(["hosts", "undrain", "builder-1", "--policy-revision", String(view.revision - 1)]);
      assert.equal(stale.code, 2);
      assert.match(stale.stderr, /refused \(conflict\): .*policy revision/);
      assert.equal(stale.stdout, "");

      const undrained = await kiln([
        "hosts",
        "undrain",
        "builder-1",
        "--policy-revision",
        String(view.revision),
        "--note",
        "maintenance done",
        "--json",
      ]);
      assert.equal(undrained.code, 0, undrained.stderr);
      assert.equal((JSON.parse(undrained.stdout) as HostView).state, "serving");

      const audit = await kiln(["audit", "list", "--json"]);
      assert.equal(audit.code, 0, audit.stderr);
      const entries = JSON.parse(audit.stdout) as { operation: string; target: string; outcome?: string }[];
      const onHost = entries.filter((e) => e.target === "host:builder-1").map((e) => [e.operation, e.outcome]);
      assert.deepEqual(onHost, [
        ["operator.hosts.undrain", "performed"],
        ["operator.hosts.undrain", "conflict"],
        ["operator.hosts.drain", "performed"],
      ]);
      const exported = await kiln(["audit", "export", "--json"]);
      assert.equal(exported.code, 0, exported.stderr);
      assert.ok((JSON.parse(exported.stdout) as unknown[]).length >= entries.length);
    });

    it("tenant controls: get, then set at the version read with a JSON body", async () => {
      const read = await kiln(["tenants", "controls", "get", tenant, "--json"]);
      assert.equal(read.code, 0, read.stderr);
      const controls = JSON.parse(read.stdout) as { version: number; max_running_jobs: number };
      const set = await kiln([
        "tenants",
        "controls",
        "set",
        tenant,
        "--body",
        JSON.stringify({ changes: { max_running_jobs: 3 } }),
        "--expected-version",
        String(controls.version),
        "--json",
      ]);
      assert.equal(set.code, 0, set.stderr);
      const changed = JSON.parse(set.stdout) as { version: number; max_running_jobs: number };
      assert.equal(changed.max_running_jobs, 3);
      assert.equal(changed.version, controls.version + 1);
      const text = await kiln(["tenants", "controls", "get", tenant]);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /^max_running_jobs: 3$/m);
      assert.match(text.stdout, /^suspension:\n {2}suspended: false$/m);
    });

    it("a refusal is the Refusal document, with its code on stderr and a non-zero exit", async () => {
      const text = await kiln(["hosts", "get", "nowhere"]);
      assert.equal(text.code, 2);
      assert.match(text.stderr, /^kiln: refused \(operator_not_found\): /m);
      const json = await kiln(["hosts", "get", "nowhere", "--json"]);
      assert.equal(json.code, 2);
      const refusal = JSON.parse(json.stdout) as { code: string; status: number; detail: string };
      assert.equal(refusal.code, "operator_not_found");
      assert.equal(refusal.status, 404);

      const unimplemented = await kiln(["platform", "states", "--json"]);
      assert.equal(unimplemented.code, 2);
      assert.equal((JSON.parse(unimplemented.stdout) as { code: string }).code, "not_implemented");
      assert.match(unimplemented.stderr, /refused \(not_implemented\)/);
    });

    it("a request its schema refuses is reported before anything is sent", async () => {
      const before = (await api("/operator/api/audit")) as unknown[];
      const bad = await kiln(["hosts", "undrain", "builder-2", "--policy-revision", "one"]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--policy-revision: expected an integer, got "one"/);
      const missing = await kiln(["hosts", "undrain", "builder-2"]);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /body\/policy_revision: Expected required property/);
      assert.deepEqual(await api("/operator/api/audit"), before, "no session was opened, nothing was audited");
    });

    it("without a credential: a clear error; --credential-file works; the credential is never an argument", async () => {
      const { KILN_OPERATOR_CREDENTIAL: _credential, ...withoutCredential } = env;
      const none = await kiln(["hosts", "list"], withoutCredential);
      assert.equal(none.code, 2);
      assert.match(none.stderr, /no operator credential: set KILN_OPERATOR_CREDENTIAL or pass --credential-file/);

      const file = join(mkdtempSync(join(tmpdir(), "kiln-operator-")), "credential");
      writeFileSync(file, `${credential}\n`, { mode: 0o600 });
      const fromFile = await kiln(["hosts", "list", "--credential-file", file, "--json"], withoutCredential);
      assert.equal(fromFile.code, 0, fromFile.stderr);
      assert.equal((JSON.parse(fromFile.stdout) as HostView[]).length, 3);

      const wrong = join(mkdtempSync(join(tmpdir(), "kiln-operator-")), "credential");
      writeFileSync(wrong, "kiln_operator_not-the-one\n", { mode: 0o600 });
      const refused = await kiln(["hosts", "list", "--credential-file", wrong], withoutCredential);
      assert.equal(refused.code, 2);
      assert.match(refused.stderr, /refused \(operator_not_found\)/);

      // No option takes the credential as a value (it would show in `ps`).
      const asValue = await kiln(["hosts", "list", "--credential", "kiln_operator_typed-by-hand"], withoutCredential);
      assert.notEqual(asValue.code, 0);
      assert.match(asValue.stderr, /unknown option '--credential'/);
    });

    it("the credential appears in no run's arguments, output or errors", () => {
      assert.ok(runs.length >= 15);
      for (const { args, run } of runs) {
        assert.ok(!args.some((a) => a.includes(credential)), `argv of ${args.join(" ")}`);
        assert.ok(!run.stdout.includes(credential), `stdout of ${args.join(" ")}`);
        assert.ok(!run.stderr.includes(credential), `stderr of ${args.join(" ")}`);
      }
    });
  });
}
