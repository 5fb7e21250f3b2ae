import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Injection } from "@kiln/contract";
import { lineageSeedContext } from "../src/domain/hosts/lineage-seed-context.js";

const applied = (name: string, value: string): Injection => ({
  setting: name,
  value,
  origin: "platform default",
  status: "applied",
  detail: "",
  environment: { name, value },
});
const base = {
  jobClass: "build/dev/stable",
  invocation: { arguments: [] as string[], environment: {} as Record<string, string> },
  injections: [applied("CARGO_BUILD_JOBS", "2"), applied("CARGO_PROFILE_DEV_DEBUG", "line-tables-only")],
};
const context = (over: Partial<typeof base> = {}) => lineageSeedContext({ ...base, ...over });

describe("the seed context of a lineage (what its dependency builds were compiled with)", () => {
  it("is the same for jobs whose units compile alike, whatever they run or test", () => {
    assert.match(context(), /^ctx_[0-9a-f]{32}$/);
    assert.equal(context(), context({ injections: [...base.injections].reverse() }));
    assert.equal(
      context(),
      context({ invocation: { arguments: ["-p", "app", "--", "--target", "x"], environment: { RUST_LOG: "debug" } } }),
      "test arguments after -- and run-time environment do not change how units compile",
    );
  });

  it("differs with the class, an applied injected setting, the target or the compiling flags", () => {
    const contexts = [
      context(),
      context({ jobClass: "build/release/stable" }),
      context({ jobClass: "build/dev/1.85.0" }),
      context({ injections: [applied("CARGO_BUILD_JOBS", "2")] }),
      context({ invocation: { arguments: ["--target", "aarch64-unknown-linux-gnu"], environment: {} } }),
      context({ invocation: { arguments: ["--target=aarch64-unknown-linux-gnu"], environment: {} } }),
      context({ invocation: { arguments: [], environment: { RUSTFLAGS: "-C target-cpu=native" } } }),
      context({ invocation: { arguments: [], environment: { CARGO_PROFILE_DEV_OPT_LEVEL: "1" } } }),
    ];
    // The two spellings of one --target are the same context; every other pair differs.
    assert.equal(contexts[4], contexts[5]);
    const distinct = new Set(contexts);
    assert.equal(distinct.size, contexts.length - 1, contexts.join("\n"));
  });

  it("ignores an injection that was not applied (the repository's own configuration set it)", () => {
    const notApplied: Injection = { ...applied("CARGO_PROFILE_DEV_DEBUG", "line-tables-only"), status: "not applied" };
    assert.equal(
      context({ injections: [applied("CARGO_BUILD_JOBS", "2"), notApplied] }),
      context({ injections: [applied("CARGO_BUILD_JOBS", "2")] }),
    );
  });
});
