/**
 * Which environment variables a job may declare: every name its schema admits except those
 * through which cargo, rustc or the dynamic linker would run a program of the job's naming in
 * place of kiln's toolchain, or would move what kiln lays out (homes, target dir, toolchain).
 *
 * A denylist of patterns, not an allowlist. A job's environment is mostly for its own code —
 * `RUST_LOG`, `PROPTEST_CASES`, a test's fixture path, `CC=clang` for a build script — and no
 * list could name what a tenant's tests read, so an allowlist would refuse ordinary jobs. What
 * must be refused is a small, closed family that cargo itself defines: its configuration keys
 * read from `CARGO_<KEY>` (cargo's config-environment rule: the key upper-cased, `.` and `-` as
 * `_`), the variables cargo and rustup read by name, and the loader's `LD_*`. Each pattern
 * below names the keys of that family that name a program or a path; matching is exact on
 * case, as cargo's and the loader's own lookups are (`rustc_wrapper` is read by nothing).
 *
 * None of these could leave the sandbox — a wrapper or runner runs inside it, as a build
 * script could — but they would make the job's evidence untrue: a job admitted as `cargo test`
 * with toolchain X would have compiled, linked or run its tests with something else. So they
 * are refused at admission (`invalid_request` naming the variable), not dropped on the host.
 * Compiler and linker flags (`RUSTFLAGS`, `CARGO_TARGET_<triple>_RUSTFLAGS`, …) and the
 * programs a build script chooses itself (`CC`, `CXX`, `AR`, `PKG_CONFIG`) stay the job's.
 */

interface RefusedFamily {
  readonly matches: (name: string) => boolean;
  /** Completes "…<name> …": why kiln does not admit it. */
  readonly because: string;
}

const exactly =
  (...names: string[]) =>
  (name: string) =>
    names.includes(name);

const REFUSED: readonly RefusedFamily[] = [
  {
    matches: exactly(
      "PATH",
      "HOME",
      "CARGO_HOME",
      "CARGO_TARGET_DIR",
      "CARGO_BUILD_TARGET_DIR",
      "CARGO_BUILD_BUILD_DIR",
    ),
    because: "would move a directory kiln lays out for the sandbox",
  },
  {
    matches: (name) => name.startsWith("RUSTUP_"),
    because: "is rustup's, and kiln chooses the toolchain (the job's toolchain member)",
  },
  {
    matches: (name) => name.startsWith("LD_"),
    because: "changes what the dynamic linker loads into every program of the job",
  },
  {
    matches: exactly(
      "CARGO",
      "RUSTC",
      "RUSTDOC",
      "RUSTC_WRAPPER",
      "RUSTC_WORKSPACE_WRAPPER",
      "CARGO_BUILD_RUSTC",
      "CARGO_BUILD_RUSTDOC",
      "CARGO_BUILD_RUSTC_WRAPPER",
      "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    ),
    because: "names a program cargo would run in place of the admitted toolchain's cargo, rustc or rustdoc",
  },
  {
    // target.<triple>.linker / .runner / .ar, and the host's (-Zhost-config) equivalents.
    matches: (name) =>
      /^CARGO_TARGET_[A-Z0-9_]+_(LINKER|RUNNER|AR)$/.test(name) || /^CARGO_HOST_(LINKER|RUNNER)$/.test(name),
    because: "names a linker or test runner cargo would run in place of the toolchain's",
  },
  {
    // registry.credential-provider, registry.global-credential-providers, registries.<name>.credential-provider.
    matches: (name) =>
      name === "CARGO_REGISTRY_CREDENTIAL_PROVIDER" ||
      name === "CARGO_REGISTRY_GLOBAL_CREDENTIAL_PROVIDERS" ||
      /^CARGO_REGISTRIES_[A-Z0-9_]+_CREDENTIAL_PROVIDER$/.test(name),
    because: "names a credential provider program; kiln's dependency gateway holds the registry credentials",
  },
  {
    matches: (name) => name.startsWith("CARGO_UNSTABLE_"),
    because: "is cargo's -Z flag by another name, which kiln does not admit",
  },
];

/** Why `name` may not be declared in a job's environment, or null when it may. */
export function refusedEnvironmentReason(name: string): string | null {
  return REFUSED.find((family) => family.matches(name))?.because ?? null;
}
