import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { registerHost } from "@kiln/storage";
import { CLI_DIALECTS, freshConfigHome, runCli, serverTesting } from "./harness.js";

/**
 * A size no host of the deployment can place (issue 36: a kiln4-cpu job on a two-core `npm start`
 * waited queued forever): `kiln cargo test --size kiln4-cpu` is refused at submission, naming the
 * size, the sizes the deployment places and what to do instead.
 */
for (const dialect of CLI_DIALECTS) {
  describe(`kiln cargo --size no host can place (${dialect.name})`, { skip: dialect.skip }, () => {
    let close: () => Promise<void>;
    let env: Record<string, string>;
    let root: string;

    before(async () => {
      const { appWithTenant } = await serverTesting();
      const { t, person: member } = await appWithTenant(dialect, { role: "member", repository: "acme/small" });
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      close = t.close;
      // What the embedded local host of a two-core machine enrolls with.
      await registerHost(t.storage, {
        id: "local",
        vcpus: 2,
        memoryBytes: 2 ** 33,
        isolation: "sandbox",
        now: new Date(),
      });
      env = {
        XDG_CONFIG_HOME: freshConfigHome(),
        KILN_ENDPOINT: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`,
        KILN_TOKEN: member.token,
      };
      root = mkdtempSync(join(tmpdir(), "kiln-cli-size-"));
      writeFileSync(join(root, "Cargo.toml"), '[package]\nname = "small"\nversion = "0.1.0"\nedition = "2021"\n');
      mkdirSync(join(root, "src"));
      writeFileSync(join(root, "src/lib.rs"), "pub fn f() {}\n");
    });
    after(async () => {
      await close();
      rmSync(root, { recursive: true, force: true });
    });

    it("is refused at submission with the sizes this deployment places and the next step", async () => {
      const run = await runCli(["cargo", "test", "--size", "kiln4-cpu", "--repository", "acme/small"], {
        cwd: root,
        env,
      });
      assert.equal(run.code, 2, run.stderr);
      assert.match(
        run.stderr,
        /refused \(invalid_request\): body\.size asks for kiln4-cpu, which needs 4 vCPUs; no kiln host here has that many \(the largest has 2\), so this deployment places only kiln2-cpu: submit with --size kiln2-cpu, or ask the operator to enroll a host with at least 4 vCPUs/,
      );
      assert.doesNotMatch(run.stderr, /submitted/, "no job was made");
    });
  });
}
