import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { inlineFile, inlineSubmission } from "../src/testing/job-fixtures.js";

const CRATE = inlineFile("Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n');

/**
 * A toolchain no host has installed is refused at submission (issue 36: it was refused only after
 * placement, failing the job toolchain_not_admitted), with what is installed and how to ask for
 * it; while no host advertised its toolchains, the host still decides.
 */
for (const dialect of DIALECTS) {
  describe(`jobs.submit refuses a toolchain no host has (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let member: { tenant: string; token: string };
    let keys = 0;
    before(async () => {
      ({ t, person: member } = await appWithTenant(dialect, { role: "member" }));
    });
    after(() => t.close());

    const submit = (toolchain: string | undefined, files = [CRATE, inlineFile("src/lib.rs", "pub fn f() {}\n")]) => {
      keys += 1;
      const body = inlineSubmission("acme/widget", "test", files, {
        invocation: toolchain === undefined ? {} : { toolchain },
      });
      return t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(member.token), "content-type": "application/json", "idempotency-key": `tc-${keys}` },
        payload: JSON.stringify(body),
      });
    };

    it("admits any toolchain while no host advertised its own", async () => {
      await registerHost(t.storage, {
        id: "quiet",
        vcpus: 2,
        memoryBytes: 2 ** 32,
        isolation: "sandbox",
        now: t.clock.now(),
      });
      const res = await submit("1.10.0");
      assert.equal(res.statusCode, 200, res.body);
    });

    it("refuses one no host has installed, naming what is and the next step; admits what one has", async () => {
      await registerHost(t.storage, {
        id: "builder",
        vcpus: 2,
        memoryBytes: 2 ** 32,
        isolation: "sandbox",
        toolchains: [
          "1.95.0",
          "stable",
          "stable-x86_64-unknown-linux-gnu",
          "nightly",
          "nightly-x86_64-unknown-linux-gnu",
        ],
        now: t.clock.now(),
      });
      const refused = await submit("1.10.0");
      assert.equal(refused.statusCode, 400, refused.body);
      assert.equal(refused.json().code, "invalid_request");
      assert.match(
        refused.json().detail,
        /^body\.workspace\.invocation\.toolchain asks for toolchain 1\.10\.0, which no kiln host has installed \(installed: 1\.95\.0, nightly, stable\); name one of those \(kiln cargo \+<toolchain>/,
      );
      const pinned = await submit(undefined, [
        CRATE,
        inlineFile("rust-toolchain.toml", '[toolchain]\nchannel = "beta"\n'),
      ]);
      assert.equal(pinned.statusCode, 400, pinned.body);
      assert.match(pinned.json().detail, /^the workspace's rust-toolchain file asks for toolchain beta/);
      assert.match(pinned.json().detail, /pin one of those in rust-toolchain\.toml/);
      for (const offered of ["stable", "1.95.0", "nightly", undefined]) {
        const res = await submit(offered);
        assert.equal(res.statusCode, 200, `${offered}: ${res.body}`);
      }
    });
  });
}
