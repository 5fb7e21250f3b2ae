import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { kilnHostConfigFromEnv, selectHostIsolation } from "@kiln/host";

const ENV = {
  KILN_ENDPOINT: "https://kiln.test",
  KILN_HOST_DATA_DIR: "/tmp/kiln-host-disk-bound",
  KILN_EXECUTOR: "sandbox",
};

describe("kiln-host: KILN_MAX_ATTEMPT_DISK_BYTES reaches the executor it selects", () => {
  it("from the environment through the isolation settings to the sandbox executor's disk policy", async () => {
    const config = kilnHostConfigFromEnv({ ...ENV, KILN_MAX_ATTEMPT_DISK_BYTES: "8388608" });
    const isolation = await selectHostIsolation(config.isolation, { log: silentLogger });
    assert.equal(isolation.choice.isolation, "sandbox");
    assert.equal(isolation.executor.disk?.maxAttemptBytes, 8388608);
  });

  it("unset: attempts take their size's quota, never lowered", async () => {
    const isolation = await selectHostIsolation(kilnHostConfigFromEnv(ENV).isolation, { log: silentLogger });
    assert.equal(isolation.executor.disk?.maxAttemptBytes, null);
  });

  it("refuses a bound below 1 MiB or not a whole number, naming the variable", () => {
    for (const value of ["1000", "1048576.5", "lots"]) {
      assert.throws(
        () => kilnHostConfigFromEnv({ ...ENV, KILN_MAX_ATTEMPT_DISK_BYTES: value }),
        /KILN_MAX_ATTEMPT_DISK_BYTES must be a whole number of bytes, at least 1048576/,
      );
    }
  });
});
