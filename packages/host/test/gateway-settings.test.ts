import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { cratesIoIndexOf, DEFAULT_CRATES_IO_INDEX, gatewayEgressOf } from "../src/gateway/gateway-settings.js";

describe("the dependency gateway's settings (KILN_CRATES_IO_INDEX, KILN_GATEWAY_*)", () => {
  it("allows nothing beyond the public internet by default, and crates.io is crates.io", () => {
    assert.deepEqual(gatewayEgressOf({}), {
      egress: { allow: [], ownListeners: [], gitSsh: false, loopbackHttpCredentials: false },
      extraCa: undefined,
    });
    assert.equal(cratesIoIndexOf({}), DEFAULT_CRATES_IO_INDEX);
  });

  it("reads the allowances an operator sets, and keeps kiln's own listeners", () => {
    const settings = gatewayEgressOf(
      {
        KILN_GATEWAY_ALLOW: "registry.corp.example 10.0.0.0/8",
        KILN_GATEWAY_GIT_SSH: "on",
        KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS: "on",
      },
      [{ host: "127.0.0.1", port: 7860 }],
    );
    assert.deepEqual(
      settings.egress.allow.map((e) => e.text),
      ["registry.corp.example", "10.0.0.0/8"],
    );
    assert.equal(settings.egress.gitSsh, true);
    assert.equal(settings.egress.loopbackHttpCredentials, true);
    assert.deepEqual(settings.egress.ownListeners, [{ host: "127.0.0.1", port: 7860 }]);
  });

  it("reads KILN_GATEWAY_CA_FILE's certificates, and refuses a file that is missing or holds none", () => {
    const dir = mkdtempSync(join(tmpdir(), "kiln-gateway-settings-"));
    try {
      const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
      writeFileSync(join(dir, "ca.pem"), pem);
      writeFileSync(join(dir, "empty.pem"), "not a certificate\n");
      assert.equal(gatewayEgressOf({ KILN_GATEWAY_CA_FILE: join(dir, "ca.pem") }).extraCa, pem);
      assert.throws(
        () => gatewayEgressOf({ KILN_GATEWAY_CA_FILE: join(dir, "none.pem") }),
        /KILN_GATEWAY_CA_FILE: .* cannot be read/,
      );
      assert.throws(
        () => gatewayEgressOf({ KILN_GATEWAY_CA_FILE: join(dir, "empty.pem") }),
        /holds no PEM certificate/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses what it cannot read, naming the variable", () => {
    assert.throws(() => gatewayEgressOf({ KILN_GATEWAY_ALLOW: "10.0.0.0/99" }), /KILN_GATEWAY_ALLOW/);
    assert.throws(() => gatewayEgressOf({ KILN_GATEWAY_GIT_SSH: "yes" }), /KILN_GATEWAY_GIT_SSH must be on or off/);
    assert.throws(
      () => gatewayEgressOf({ KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS: "1" }),
      /KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS must be on or off/,
    );
    assert.throws(() => cratesIoIndexOf({ KILN_CRATES_IO_INDEX: "file:///srv/index" }), /KILN_CRATES_IO_INDEX/);
  });
});
