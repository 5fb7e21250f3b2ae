#!/usr/bin/env node
// Makes `npm start` and `npm test` self-sufficient on a fresh Debian 12 machine:
// installs what is missing (npm packages, Debian packages) and builds, and is quick
// when nothing is missing. Plain Node, no dependencies: it runs before npm install.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGES = ["contract", "storage", "host", "server", "client", "mcp", "cli"];
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const purpose = process.argv.includes("--for") ? process.argv[process.argv.indexOf("--for") + 1] : "start";

/** Debian packages each purpose needs, with a file that proves each is installed. */
const DEBIAN = {
  // bubblewrap: the `sandbox` executor (packages/host) runs every attempt in it; e2fsprogs makes
  // and sizes each attempt's target disk (mkfs.ext4: target-disk.ts; its tests compare with dumpe2fs and e2fsck).
  start: [
    { pkg: "bubblewrap", proof: "/usr/bin/bwrap" },
    { pkg: "e2fsprogs", proof: "/usr/sbin/debugfs" },
  ],
  test: [
    { pkg: "postgresql-15", proof: "/usr/lib/postgresql/15/bin/initdb" },
    { pkg: "bubblewrap", proof: "/usr/bin/bwrap" },
    { pkg: "e2fsprogs", proof: "/usr/sbin/debugfs" },
    // A real crate for the end-to-end test and bench/ (Debian's crate sources form an offline
    // directory source); serde only because cargo resolves semver's optional dependency.
    { pkg: "librust-semver-dev", proof: "/usr/share/cargo/registry/semver-1.0.14/Cargo.toml" },
    { pkg: "librust-serde-dev", proof: "/usr/share/cargo/registry/serde-1.0.152/Cargo.toml" },
    // The dependency gateway's tests serve these from a sparse registry built from their sources.
    { pkg: "librust-itoa-dev", proof: "/usr/share/cargo/registry/itoa-1.0.1/Cargo.toml" },
    { pkg: "librust-serde-json-dev", proof: "/usr/share/cargo/registry/serde_json-1.0.87/Cargo.toml" },
    // Real crates the gateway must provide (packages/cli/test/dependency-gateway-crates.sandbox.test.ts):
    // tera (96 locked packages) with its dev-dependencies pretty_assertions and tempfile;
    // serde_yaml (patched yaml-rust) with anyhow and indoc; pest_derive, pest_generator and
    // pest_meta as a workspace.
    { pkg: "librust-tera-dev", proof: "/usr/share/cargo/registry/tera-1.17.1/Cargo.toml" },
    { pkg: "librust-pretty-assertions-dev", proof: "/usr/share/cargo/registry/pretty_assertions-1.3.0/Cargo.toml" },
    { pkg: "librust-tempfile-dev", proof: "/usr/share/cargo/registry/tempfile-3.3.0/Cargo.toml" },
    { pkg: "librust-serde-yaml-dev", proof: "/usr/share/cargo/registry/serde_yaml-0.8.26/Cargo.toml" },
    { pkg: "librust-anyhow-dev", proof: "/usr/share/cargo/registry/anyhow-1.0.69/Cargo.toml" },
    { pkg: "librust-indoc-dev", proof: "/usr/share/cargo/registry/indoc-1.0.4/Cargo.toml" },
    { pkg: "librust-pest-derive-dev", proof: "/usr/share/cargo/registry/pest_derive-2.5.2/Cargo.toml" },
    // The dashboard's browser test (packages/server/test/dashboard-browser.browser.test.ts) drives it with playwright-core.
    { pkg: "chromium", proof: "/usr/bin/chromium" },
  ],
  // `npm run bench`: the test set plus regex (issue 6's larger real crate) and its dev-dependencies.
  bench: [
    { pkg: "postgresql-15", proof: "/usr/lib/postgresql/15/bin/initdb" },
    { pkg: "bubblewrap", proof: "/usr/bin/bwrap" },
    { pkg: "e2fsprogs", proof: "/usr/sbin/debugfs" },
    { pkg: "librust-semver-dev", proof: "/usr/share/cargo/registry/semver-1.0.14/Cargo.toml" },
    { pkg: "librust-serde-dev", proof: "/usr/share/cargo/registry/serde-1.0.152/Cargo.toml" },
    { pkg: "librust-regex-dev", proof: "/usr/share/cargo/registry/regex-1.7.1/Cargo.toml" },
    { pkg: "librust-quickcheck-dev", proof: "/usr/share/cargo/registry/quickcheck-1.0.3/Cargo.toml" },
    { pkg: "librust-rand-dev", proof: "/usr/share/cargo/registry/rand-0.8.5/Cargo.toml" },
    // bench/dependency-gateway.mjs: the registry it serves holds serde_json and tokio.
    { pkg: "librust-itoa-dev", proof: "/usr/share/cargo/registry/itoa-1.0.1/Cargo.toml" },
    { pkg: "librust-serde-json-dev", proof: "/usr/share/cargo/registry/serde_json-1.0.87/Cargo.toml" },
    { pkg: "librust-tokio-dev", proof: "/usr/share/cargo/registry/tokio-1.24.2/Cargo.toml" },
    // bench/inner-loop.mjs: serde_json's dev-dependencies (cargo test resolves them), and the
    // 7-crate workspace of pest's four crates and three unic crates.
    { pkg: "librust-automod-dev", proof: "/usr/share/cargo/registry/automod-1.0.3/Cargo.toml" },
    { pkg: "librust-ref-cast-dev", proof: "/usr/share/cargo/registry/ref-cast-1.0.3/Cargo.toml" },
    { pkg: "librust-rustversion-dev", proof: "/usr/share/cargo/registry/rustversion-1.0.6/Cargo.toml" },
    { pkg: "librust-serde-bytes-dev", proof: "/usr/share/cargo/registry/serde_bytes-0.11.5/Cargo.toml" },
    { pkg: "librust-serde-stacker-dev", proof: "/usr/share/cargo/registry/serde_stacker-0.1.4/Cargo.toml" },
    { pkg: "librust-trybuild-dev", proof: "/usr/share/cargo/registry/trybuild-1.0.76/Cargo.toml" },
    { pkg: "librust-pest-derive-dev", proof: "/usr/share/cargo/registry/pest_derive-2.5.2/Cargo.toml" },
    { pkg: "librust-unic-ucd-version-dev", proof: "/usr/share/cargo/registry/unic-ucd-version-0.9.0/Cargo.toml" },
    { pkg: "librust-unic-char-range-dev", proof: "/usr/share/cargo/registry/unic-char-range-0.9.0/Cargo.toml" },
  ],
};

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", ...opts });
  if (r.status !== 0) {
    process.stderr.write(`setup: ${cmd} ${args.join(" ")} failed (${r.status ?? r.signal})\n`);
    process.exit(1);
  }
}

function ensureDebianPackages() {
  const missing = (DEBIAN[purpose] ?? []).filter((p) => !existsSync(p.proof)).map((p) => p.pkg);
  if (missing.length === 0) return;
  process.stderr.write(`setup: installing Debian packages ${missing.join(", ")}\n`);
  const sudo = process.getuid?.() === 0 ? [] : ["sudo"];
  const apt = (args) =>
    run(sudo[0] ?? "apt-get", sudo.length ? ["apt-get", ...args] : args, {
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
  apt(["update", "-qq"]);
  apt(["install", "-y", "-qq", "--no-install-recommends", ...missing]);
}

/** What the installed node_modules must match: every manifest and the lockfile. */
function manifestsDigest() {
  const hash = createHash("sha256");
  for (const file of ["package.json", "package-lock.json", ...PACKAGES.map((p) => `packages/${p}/package.json`)]) {
    const path = join(root, file);
    if (existsSync(path)) hash.update(file).update(readFileSync(path));
  }
  return hash.digest("hex");
}

function ensureNpmPackages() {
  const stampFile = join(root, "node_modules", ".kiln-install-stamp");
  if (existsSync(stampFile) && readFileSync(stampFile, "utf8") === manifestsDigest()) return;
  process.stderr.write("setup: installing npm packages\n");
  // `npm install`, not `npm ci`: the lockfile carries no registry URLs or foreign-platform
  // optional packages on these machines, which `npm ci` refuses as out of sync.
  run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error"]);
  writeFileSync(stampFile, manifestsDigest());
}

function build() {
  run(join(root, "node_modules", ".bin", "tsc"), ["-b", ...PACKAGES.map((p) => `packages/${p}`)]);
  // The `kiln` bin ships bundled (packages/cli/bundle.mjs says why).
  run(process.execPath, [join(root, "packages", "cli", "bundle.mjs")]);
}

/**
 * The workspace packages' bins (`kiln`, `kiln-server`) in node_modules/.bin, executable. npm
 * links a workspace bin at install only if its target exists then, and on a fresh clone the
 * build comes after the install; without this, `kiln` would be missing until the next install.
 */
function linkWorkspaceBins() {
  for (const pkg of PACKAGES) {
    const manifest = JSON.parse(readFileSync(join(root, "packages", pkg, "package.json"), "utf8"));
    for (const [name, target] of Object.entries(manifest.bin ?? {})) {
      const built = join(root, "packages", pkg, target);
      if (!existsSync(built)) continue;
      chmodSync(built, 0o755);
      const link = join(root, "node_modules", ".bin", name);
      const relative = join("..", manifest.name, target);
      let current = null;
      try {
        current = readlinkSync(link);
      } catch {
        // absent
      }
      if (current === relative) continue;
      mkdirSync(dirname(link), { recursive: true });
      rmSync(link, { force: true });
      symlinkSync(relative, link);
    }
  }
}

ensureDebianPackages();
ensureNpmPackages();
build();
linkWorkspaceBins();
// Quiet on success: the command that follows prints what matters.
