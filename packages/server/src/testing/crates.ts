/** Generated crates for end-to-end tests: inline-source files, sorted by path. */
export interface SourceFile {
  path: string;
  bytes: number[];
  executable: boolean;
}

const file = (path: string, text: string, executable = false): SourceFile => ({
  path,
  bytes: [...Buffer.from(text)],
  executable,
});

export function sorted(files: SourceFile[]): SourceFile[] {
  return [...files].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
}

/** A library whose unit tests pass (two), fail (`failing` of them) and are ignored (one), plus a doctest. */
export function testedCrate(name: string, failing: number): SourceFile[] {
  const failures = Array.from(
    { length: failing },
    (_, i) =>
      `    #[test]\n    fn fails_${i}() {\n        assert_eq!(super::add(1, 1), 3, "deliberately wrong");\n    }\n`,
  ).join("");
  return sorted([
    file("Cargo.toml", `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n`),
    file(
      "src/lib.rs",
      `/// Adds.\n///\n/// \`\`\`\n/// assert_eq!(${name}::add(2, 2), 4);\n/// \`\`\`\npub fn add(a: u64, b: u64) -> u64 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n    #[test]\n    fn adds_zero() {\n        assert_eq!(super::add(0, 3), 3);\n    }\n    #[test]\n    #[ignore]\n    fn slow() {}\n${failures}}\n`,
    ),
    file("tests/integration.rs", `#[test]\nfn integrates() {\n    assert_eq!(${name}::add(40, 2), 42);\n}\n`),
  ]);
}

/**
 * The registry crates registryCrate depends on (startSparseRegistry({ crates: REGISTRY_CRATE_DEPENDENCIES })):
 * two small ones without dependencies of their own. What the tests that build it show (the
 * gateway's fetch, its cache, lineage seeding by the lockfiles' shared crates) does not depend
 * on their size, and serde and serde_json built cold cost far more CPU than any of it needs.
 */
export const REGISTRY_CRATE_DEPENDENCIES = ["itoa", "fnv"];

/** registryCrate's Cargo.toml: package `name`, itoa 1 and fnv 1 from crates.io (the gateway's registry). */
export const registryCrateManifest = (name: string): string =>
  `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nitoa = "1"\nfnv = "1"\n`;

/** registryCrate's src/lib.rs: two tests that pass only with both dependencies built. */
export const REGISTRY_CRATE_LIB = `
pub fn render(n: u64) -> String {
    itoa::Buffer::new().format(n).to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_with_itoa() {
        assert_eq!(super::render(128), "128");
    }
    #[test]
    fn hashes_with_fnv() {
        let mut map = fnv::FnvHashMap::default();
        map.insert("a", 2);
        assert_eq!(map["a"], 2);
    }
}
`;
