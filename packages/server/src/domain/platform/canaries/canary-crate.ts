/**
 * The canary's cargo project: one library file with one test, no dependencies, so `cargo test`
 * runs offline and exercises the whole path of a job (admission, placement, sandbox, toolchain,
 * compiler, libtest, evidence) in a few seconds. Submitted inline (schema version 1), sorted
 * as the submission requires.
 */
const FILES: Record<string, string> = {
  "Cargo.toml": '[package]\nname = "kiln-canary"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
  "src/lib.rs":
    "/// Adds two numbers; the canary's one test checks it.\npub fn add(a: u64, b: u64) -> u64 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n}\n",
};

/** The repository canary jobs name in the canary tenant (onboarded by the canary loop). */
export const CANARY_REPOSITORY = "kiln-canary/canary";

/** The canary's size: the smallest, so a canary fits wherever any job does. */
export const CANARY_SIZE = "kiln2-cpu";

/** The jobs.submit body of a canary: `cargo test` of the canary crate. */
export function canarySubmission() {
  return {
    schema_version: 1,
    repository: CANARY_REPOSITORY,
    size: CANARY_SIZE,
    workspace: {
      base_commit: "0000000000000000000000000000000000000000",
      branch: "canary",
      invocation: { operation: "test", arguments: [] },
      source: {
        files: Object.keys(FILES)
          .sort()
          .map((path) => ({ path, bytes: [...Buffer.from(FILES[path] ?? "")], executable: false })),
      },
    },
  };
}
