import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { parseSettingValue } from "../src/commands/settings.js";
import { CLI_DIALECTS, freshConfigHome, runCli, serverTesting } from "./harness.js";

/** `kiln settings` against a real server on each engine (SQLite and PostgreSQL). */
for (const dialect of CLI_DIALECTS) {
  describe(`kiln settings against a real server (${dialect.name})`, { skip: dialect.skip }, () => {
    let close: () => Promise<void>;
    let admin: Record<string, string>;
    let viewer: Record<string, string>;

    before(async () => {
      const { testApp, personWithToken } = await serverTesting();
      const t = await testApp(await dialect.openFresh());
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      const endpoint = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
      close = t.close;
      const owner = await personWithToken(t.storage, { role: "admin" });
      const reader = await personWithToken(t.storage, { tenant: owner.tenant, role: "viewer" });
      admin = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: owner.token };
      viewer = { XDG_CONFIG_HOME: freshConfigHome(), KILN_ENDPOINT: endpoint, KILN_TOKEN: reader.token };
    });
    after(() => close());

    it("shows the settings at version 0 with the limits beside consumption; --json prints TenantSettings", async () => {
      const text = await runCli(["settings"], { env: viewer });
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /settings of .*, version 0 \(never written\)/);
      assert.match(text.stdout, /^default_size\s+kiln2-cpu\s+platform default\s+applied$/m);
      assert.match(text.stdout, /^bandwidth_bytes_per_month\s+\d+\s+0$/m);
      assert.match(text.stdout, /kiln settings set <name> <value> --version 0/);
      const json = await runCli(["settings", "get", "--json"], { env: viewer });
      assert.equal(json.code, 0, json.stderr);
      const doc = JSON.parse(json.stdout) as { version: number; limits: Record<string, unknown> };
      assert.equal(doc.version, 0);
      assert.deepEqual(Object.keys(doc.limits).sort(), [
        "bandwidth_bytes_per_month",
        "max_running_jobs",
        "storage_quota_bytes",
      ]);
    });

    it("sets at the version read; a moved-past version is refused stale_version naming the current one", async () => {
      const set = await runCli(["settings", "set", "allowed_sizes", "kiln2-cpu,kiln4-cpu", "--version", "0"], {
        env: admin,
      });
      assert.equal(set.code, 0, set.stderr);
      assert.match(set.stdout, /allowed_sizes set on tenant:.*: version 1, by /);
      assert.match(set.stdout, /effective: next admitted job/);

      const after = await runCli(["settings", "--json"], { env: viewer });
      const doc = JSON.parse(after.stdout) as { version: number; settings: { name: string; value: unknown }[] };
      assert.equal(doc.version, 1);
      assert.deepEqual(doc.settings.find((s) => s.name === "allowed_sizes")?.value, ["kiln2-cpu", "kiln4-cpu"]);

      const stale = await runCli(["settings", "set", "agents_may_submit", "false", "--version", "0", "--json"], {
        env: admin,
      });
      assert.equal(stale.code, 2);
      const refusal = JSON.parse(stale.stdout) as { code: string; current_version: number };
      assert.equal(refusal.code, "stale_version");
      assert.equal(refusal.current_version, 1);

      const receipt = await runCli(["settings", "set", "agents_may_submit", "false", "--version", "1", "--json"], {
        env: admin,
      });
      assert.equal(receipt.code, 0, receipt.stderr);
      assert.equal((JSON.parse(receipt.stdout) as { version: number }).version, 2);
    });

    it("an operator-controlled name is the service's operator_controlled refusal; a viewer lacks the scope", async () => {
      const controlled = await runCli(["settings", "set", "bandwidth_bytes_per_month", "1", "--version", "2"], {
        env: admin,
      });
      assert.equal(controlled.code, 2);
      assert.match(controlled.stderr, /refused \(operator_controlled\)/);
      const scoped = await runCli(["settings", "set", "default_toolchain", "stable", "--version", "2"], {
        env: viewer,
      });
      assert.equal(scoped.code, 2);
      assert.match(scoped.stderr, /refused \((out_of_scope|role_required)\)/);
    });

    it("refuses a value that does not fit the setting's type, and a --version that is not a number, locally", async () => {
      const bad = await runCli(["settings", "set", "log_retention_days", "ten", "--version", "2"], { env: admin });
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /log_retention_days takes a whole number, got ten/);
      const version = await runCli(["settings", "set", "log_retention_days", "10", "--version", "x"], { env: admin });
      assert.equal(version.code, 2);
      assert.match(version.stderr, /--version must be the settings version read/);
    });

    it("a value the service refuses is its invalid_request naming the field; nothing is written", async () => {
      const outOfRange = await runCli(["settings", "set", "log_retention_days", "100000", "--version", "2", "--json"], {
        env: admin,
      });
      assert.equal(outOfRange.code, 2, outOfRange.stderr);
      const refusal = JSON.parse(outOfRange.stdout) as { code: string; detail: string };
      assert.equal(refusal.code, "invalid_request");
      assert.match(refusal.detail, /body\.changes\.log_retention_days/);
      const read = JSON.parse((await runCli(["settings", "--json"], { env: viewer })).stdout) as { version: number };
      assert.equal(read.version, 2);
    });

    it("types values by the contract's schema", () => {
      assert.equal(parseSettingValue("wall_clock_ceiling_seconds", "600"), 600);
      assert.equal(parseSettingValue("agents_may_submit", "true"), true);
      assert.deepEqual(parseSettingValue("allowed_sizes", '["kiln8-cpu"]'), ["kiln8-cpu"]);
      assert.equal(parseSettingValue("default_toolchain", "1.82.0"), "1.82.0");
    });
  });
}
