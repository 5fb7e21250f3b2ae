import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { openSqliteForTest } from "@kiln/storage/testing";
import { refusedEnvironmentReason } from "../src/domain/jobs/refused-environment.js";
import { bearer, type TestApp, tenantWithRepository, testApp } from "../src/testing/harness.js";
import { inlineFile, inlineSubmission } from "../src/testing/job-fixtures.js";

/** A minimal test job declaring `environment`. */
const submission = (environment: Record<string, string>) =>
  inlineSubmission(
    "acme/widget",
    "test",
    [
      inlineFile("Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n'),
      inlineFile("src/lib.rs", "pub fn f() {}\n"),
    ],
    { invocation: { environment } },
  );

/** One name of each refused family (and of each pattern's forms), as a job might declare it. */
const REFUSED = [
  "PATH",
  "HOME",
  "CARGO_HOME",
  "CARGO_TARGET_DIR",
  "CARGO_BUILD_TARGET_DIR",
  "CARGO_BUILD_BUILD_DIR",
  "RUSTUP_HOME",
  "RUSTUP_TOOLCHAIN",
  "RUSTUP_DIST_SERVER",
  "LD_PRELOAD",
  "LD_LIBRARY_PATH",
  "LD_AUDIT",
  "CARGO",
  "RUSTC",
  "RUSTDOC",
  "RUSTC_WRAPPER",
  "RUSTC_WORKSPACE_WRAPPER",
  "CARGO_BUILD_RUSTC",
  "CARGO_BUILD_RUSTDOC",
  "CARGO_BUILD_RUSTC_WRAPPER",
  "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
  "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
  "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER",
  "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER",
  "CARGO_TARGET_WASM32_WASIP1_RUNNER",
  "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_AR",
  "CARGO_HOST_LINKER",
  "CARGO_HOST_RUNNER",
  "CARGO_REGISTRY_CREDENTIAL_PROVIDER",
  "CARGO_REGISTRY_GLOBAL_CREDENTIAL_PROVIDERS",
  "CARGO_REGISTRIES_MY_MIRROR_CREDENTIAL_PROVIDER",
  "CARGO_UNSTABLE_BUILD_STD",
];

/** Ordinary variables jobs declare, including near misses of the refused patterns. */
const ADMITTED = [
  "RUST_LOG",
  "RUST_BACKTRACE",
  "RUSTFLAGS",
  "RUSTDOCFLAGS",
  "CARGO_ENCODED_RUSTFLAGS",
  "CARGO_BUILD_RUSTFLAGS",
  "CARGO_BUILD_TARGET",
  "CARGO_BUILD_JOBS",
  "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
  "CARGO_PROFILE_DEV_DEBUG",
  "CARGO_INCREMENTAL",
  "CARGO_TERM_COLOR",
  "CC",
  "CXX",
  "AR",
  "CFLAGS",
  "PKG_CONFIG_PATH",
  "PROPTEST_CASES",
  "MY_LINKER",
  "rustc_wrapper",
  "cargo_home",
  "TMPDIR",
  "KILN_MARKER",
];

describe("a job's environment: refused families and ordinary variables", () => {
  it("each refused name has a reason; ordinary names have none", () => {
    for (const name of REFUSED) assert.notEqual(refusedEnvironmentReason(name), null, `${name} is refused`);
    for (const name of ADMITTED) assert.equal(refusedEnvironmentReason(name), null, `${name} is admitted`);
  });

  describe("at jobs.submit (SQLite)", () => {
    let t: TestApp;
    let token: string;
    before(async () => {
      t = await testApp(await openSqliteForTest());
      token = (await tenantWithRepository(t.storage, { role: "member" })).token;
    });
    after(() => t.close());

    const submitWith = (environment: Record<string, string>, key: string) =>
      t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
        payload: JSON.stringify(submission(environment)),
      });

    it("refuses each refused name with invalid_request naming the variable and why", async () => {
      let n = 0;
      for (const name of REFUSED) {
        // Beside an ordinary variable, so the refusal is about this name and not the set.
        const res = await submitWith({ RUST_LOG: "debug", [name]: "/usr/bin/true" }, `refused-${n++}`);
        assert.equal(res.statusCode, 400, `${name}: ${res.body}`);
        assert.equal(res.json().code, "invalid_request", res.body);
        const detail = res.json().detail as string;
        assert.ok(detail.includes(`body.workspace.invocation.environment.${name} `), `${name}: ${detail}`);
        assert.ok(detail.includes(refusedEnvironmentReason(name) ?? "?"), `${name}: ${detail}`);
      }
    });

    it("admits a job declaring every ordinary variable", async () => {
      const res = await submitWith(Object.fromEntries(ADMITTED.map((name) => [name, "1"])), "ordinary");
      assert.equal(res.statusCode, 200, res.body);
    });
  });
});
