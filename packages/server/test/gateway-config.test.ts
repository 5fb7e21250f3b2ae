import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { configFromEnv } from "../src/config.js";

describe("the dependency gateway's configuration in kiln-server", () => {
  it("names kiln's own listeners (KILN_LISTEN, KILN_HOST_LISTEN) for the gateway never to reach, and the operator's allowances", () => {
    const config = configFromEnv({
      KILN_LISTEN: "127.0.0.1:7860",
      KILN_HOST_LISTEN: "0.0.0.0:7861",
      KILN_GATEWAY_ALLOW: "10.0.0.0/8",
    });
    assert.deepEqual(config.gateway.egress.ownListeners, [
      { host: "127.0.0.1", port: 7860 },
      { host: "0.0.0.0", port: 7861 },
    ]);
    assert.deepEqual(
      config.gateway.egress.allow.map((e) => e.text),
      ["10.0.0.0/8"],
    );
    assert.throws(() => configFromEnv({ KILN_GATEWAY_ALLOW: "http://x" }), /KILN_GATEWAY_ALLOW/);
  });
});
