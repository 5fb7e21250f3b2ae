#!/usr/bin/env node
// Makes `npm start` and `npm test` self-sufficient on a fresh Debian 12 machine:
// installs what is missing (npm packages, Debian packages) and builds, and is quick
// when nothing is missing. Plain Node, no dependencies: it runs before npm install.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { delimiter, dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import {
  isAtLeast,
  OWN_NODE_MINIMUM,
  RUNTIME_VERSION,
  runtimeDirectory,
  runtimeRecordFile,
} from "./project-runtime.mjs";

const PACKAGES = ["contract", "storage", "host", "server", "client", "mcp", "cli"];
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const purpose = process.argv.includes("--for") ? process.argv[process.argv.indexOf("--for") + 1] : "start";

/**
 * What the `microvm` isolation runs with (packages/host/src/executor/microvm/): QEMU with its
 * microvm machine type, mkfs.erofs for the guest's read-only images, debootstrap for the guest
 * root, glibc's static library for the guest agent (a statically linked Rust binary). The guest
 * kernel is taken from Debian's package by the host itself (apt-get download: see
 * ensureAptLists).
 */
const MICROVM = [
  { pkg: "qemu-system-x86", proof: "/usr/bin/qemu-system-x86_64" },
  { pkg: "erofs-utils", proof: "/usr/bin/mkfs.erofs" },
  { pkg: "debootstrap", proof: "/usr/sbin/debootstrap" },
  { pkg: "libc6-dev", proof: "/usr/lib/x86_64-linux-gnu/libc.a" },
];

/**
 * `npm start`'s host chooses its isolation itself (KILN_EXECUTOR=auto): a microVM where KVM boots a
 * probe guest, else the sandbox. Without /dev/kvm there is nothing to probe, so the microVM's
 * packages are installed only where the machine has it; without them `auto` serves with the
 * sandbox and says why.
 */
const MICROVM_FOR_START = existsSync("/dev/kvm") ? MICROVM : [];

/** Debian packages each purpose needs, with a file that proves each is installed. */
const DEBIAN = {
  // bubblewrap: the `sandbox` executor (packages/host) runs every attempt in it; e2fsprogs makes
  // and sizes each attempt's target disk (mkfs.ext4: target-disk.ts; its tests compare with dumpe2fs and e2fsck).
  start: [
    { pkg: "bubblewrap", proof: "/usr/bin/bwrap" },
    { pkg: "e2fsprogs", proof: "/usr/sbin/debugfs" },
    ...MICROVM_FOR_START,
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
    // xmllint validates the JUnit XML of test jobs against junit-10.xsd (packages/contract/test/junit.test.ts).
    { pkg: "libxml2-utils", proof: "/usr/bin/xmllint" },
    // The dashboard's browser test (packages/server/test/dashboard-browser.browser.test.ts) drives it with playwright-core.
    { pkg: "chromium", proof: "/usr/bin/chromium" },
    // The microVM isolation's tests (real QEMU under TCG on these machines).
    ...MICROVM,
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
    // bench/microvm.mjs.
    ...MICROVM,
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

/** A node executable's version and native-module ABI, by running it. */
function describeNode(node) {
  const r = spawnSync(node, ["-p", "JSON.stringify({ version: process.version, modules: process.versions.modules })"], {
    encoding: "utf8",
  });
  if (r.status !== 0) {
    process.stderr.write(`setup: ${node} does not run (${r.status ?? r.signal}): ${r.stderr}\n`);
    process.exit(1);
  }
  return JSON.parse(r.stdout);
}

/**
 * `node` described, without running it when this process is it or a previous setup described
 * the same file (same size and modification time: an upgrade in place changes both).
 */
function identifyNode(node, known) {
  const { size, mtimeMs } = statSync(node);
  const file = `${size}:${mtimeMs}`;
  if (node === process.execPath) return { node, version: process.version, modules: process.versions.modules, file };
  const same = known.find((k) => k?.node === node && k.file === file);
  return same ? { node, version: same.version, modules: same.modules, file } : { node, ...describeNode(node), file };
}

/**
 * The node this setup was started from: the one running npm (after the first setup npm runs this
 * script on the project's runtime, through node_modules/.bin/node), else this process's own.
 */
function machineNode(previous) {
  const node = process.env.npm_node_execpath || process.execPath;
  // Started by the project's runtime itself (node_modules/.bin/node scripts/…): the machine's node is the one recorded.
  if (node.startsWith(runtimeDirectory(root) + sep) && previous?.machine) return previous.machine;
  return identifyNode(node, [previous?.machine]);
}

/**
 * Node.js RUNTIME_VERSION from the npm registry into node_modules/.kiln-runtime/<package>-<version>:
 * unpacked and checked in a directory of its own, then renamed into place, so a directory under
 * the final name is always a complete runtime (an interrupted install leaves only a `.partial-`
 * directory, removed by the next one).
 */
function installRuntime(installed) {
  const directory = runtimeDirectory(root);
  const platformPackage = `node-${process.platform}-${process.arch}`;
  process.stderr.write(`setup: installing Node.js ${RUNTIME_VERSION} (${platformPackage}) from the npm registry\n`);
  mkdirSync(directory, { recursive: true });
  // Interrupted installs, the runtimes an earlier RUNTIME_VERSION left (about 190 MB each), and
  // this one's directory if something has since removed its executable.
  for (const entry of readdirSync(directory)) {
    if (entry.startsWith(".partial-") || entry.startsWith("node-")) {
      rmSync(join(directory, entry), { recursive: true, force: true });
    }
  }
  const staging = mkdtempSync(join(directory, ".partial-"));
  // `npm pack` fetches the package's tarball (checked against the registry's integrity) and runs none of its scripts.
  const packed = spawnSync("npm", ["pack", `${platformPackage}@${RUNTIME_VERSION}`, "--json", "--loglevel=error"], {
    cwd: staging,
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
  });
  if (packed.status !== 0) {
    process.stderr.write(
      `setup: npm pack ${platformPackage}@${RUNTIME_VERSION} failed (${packed.status ?? packed.signal})\n`,
    );
    process.exit(1);
  }
  const tarball = join(staging, JSON.parse(packed.stdout)[0].filename);
  run("tar", ["-xzf", tarball, "-C", staging, "--strip-components=1", "--no-same-owner"]);
  rmSync(tarball);
  const unpacked = describeNode(join(staging, "bin", "node"));
  if (unpacked.version !== `v${RUNTIME_VERSION}` || !existsSync(join(staging, "include", "node", "common.gypi"))) {
    process.stderr.write(
      `setup: ${platformPackage}@${RUNTIME_VERSION} unpacked as ${unpacked.version}, or without include/node\n`,
    );
    process.exit(1);
  }
  // mkdtemp made it private; the runtime is for every user, as /usr/bin/node is.
  chmodSync(staging, 0o755);
  renameSync(staging, installed);
}

/**
 * The node that runs the services and the tests: the machine's own from OWN_NODE_MINIMUM up, else
 * Node.js RUNTIME_VERSION installed into the project.
 */
function ensureRuntime(machine, previous) {
  if (isAtLeast(machine.version, OWN_NODE_MINIMUM)) return machine;
  const installed = join(runtimeDirectory(root), `node-${process.platform}-${process.arch}-${RUNTIME_VERSION}`);
  const node = join(installed, "bin", "node");
  if (!existsSync(node)) installRuntime(installed);
  return identifyNode(node, [previous]);
}

/**
 * The environment npm installs and rebuilds in: the runtime first on PATH (npm and node-gyp run
 * on it), native addons compiled against its own headers (`nodedir`: the directory holding
 * `include/node`, as the npm package and Debian's /usr both lay them out), and from source, so
 * that no addon's install fetches a prebuilt binary from anywhere but the npm registry.
 */
function addonBuildEnv(runtime) {
  const prefix = dirname(dirname(runtime.node));
  return {
    ...process.env,
    PATH: `${dirname(runtime.node)}${delimiter}${process.env.PATH ?? ""}`,
    ...(existsSync(join(prefix, "include", "node", "common.gypi")) ? { npm_config_nodedir: prefix } : {}),
    npm_config_build_from_source: "true",
  };
}

/**
 * node_modules as the manifests and lockfile say, its native addons built for the runtime
 * (better-sqlite3 13 ships Node-API binaries for the common platforms in its npm package; its
 * node-gyp step compiles only where it holds none). The stamp records both, so a changed runtime
 * rebuilds them even when no manifest changed.
 */
function ensureNpmPackages(runtime) {
  const stampFile = join(root, "node_modules", ".kiln-install-stamp.json");
  const stamp = existsSync(stampFile) ? JSON.parse(readFileSync(stampFile, "utf8")) : {};
  const manifests = manifestsDigest();
  const builtFor = `${runtime.version} (modules ${runtime.modules}, ${process.platform}-${process.arch})`;
  if (stamp.manifests === manifests && stamp.builtFor === builtFor) return;
  const env = addonBuildEnv(runtime);
  // npm's own record of a finished install: without it the install below is the first, and builds for the runtime.
  const installedBefore = existsSync(join(root, "node_modules", ".package-lock.json"));
  if (stamp.manifests !== manifests) {
    process.stderr.write("setup: installing npm packages\n");
    // `npm install`, not `npm ci`: the lockfile carries no registry URLs or foreign-platform
    // optional packages on these machines, which `npm ci` refuses as out of sync.
    run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error"], { env });
  }
  if (stamp.builtFor !== builtFor && installedBefore) {
    process.stderr.write(`setup: building native addons for Node.js ${builtFor}\n`);
    run("npm", ["rebuild", "--loglevel=error"], { env });
  }
  // The addon loads on the runtime (a build against other headers fails here, not in a test).
  run(runtime.node, ["-e", "new (require('better-sqlite3'))(':memory:').close()"]);
  writeFileSync(stampFile, JSON.stringify({ manifests, builtFor }));
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

/**
 * The tests' and benchmarks' microVMs boot the machine's shared test guest (KILN_TEST_GUEST_DIR,
 * default /var/cache/kiln-test/guest): built here once (its guest root takes debootstrap a few
 * minutes the first time), found afterwards.
 */
function buildTestGuest() {
  if (purpose !== "test" && purpose !== "bench") return;
  ensureAptLists();
  run(process.execPath, [join(root, "scripts", "build-guest-images.mjs")]);
}

/**
 * The guest kernel is downloaded by name (`apt-cache depends linux-image-cloud-amd64`, then
 * `apt-get download`): on a machine whose package lists were never fetched (a fresh container)
 * apt knows no such package, so the lists are fetched once here when it does not. Asked only
 * while the test guest has no kernel yet (asking apt costs seconds).
 */
function ensureAptLists() {
  const guest = process.env.KILN_TEST_GUEST_DIR ?? "/var/cache/kiln-test/guest";
  const kernels = existsSync(guest) ? readdirSync(guest).filter((d) => d.startsWith("kernel-")) : [];
  if (kernels.some((d) => existsSync(join(guest, d, "complete")))) return;
  const known = spawnSync("apt-cache", ["depends", "linux-image-cloud-amd64"], { encoding: "utf8" });
  if (/Depends: linux-image-\S+-cloud-amd64/.test(known.stdout ?? "")) return;
  process.stderr.write("setup: fetching Debian's package lists (the microVM guest's kernel comes from them)\n");
  const sudo = process.getuid?.() === 0 ? [] : ["sudo"];
  run(sudo[0] ?? "apt-get", sudo.length ? ["apt-get", "update", "-qq"] : ["update", "-qq"]);
}

/**
 * node_modules/.bin/node links to the installed runtime, so npm scripts and npx bins run on it
 * (npm puts node_modules/.bin first on their PATH); on a machine whose own node runs kiln, no link.
 */
function linkRuntime(runtime) {
  const link = join(root, "node_modules", ".bin", "node");
  const wanted = runtime.node.startsWith(runtimeDirectory(root) + sep) ? relative(dirname(link), runtime.node) : null;
  let current = null;
  try {
    current = lstatSync(link).isSymbolicLink() ? readlinkSync(link) : "(not a link)";
  } catch {
    // absent
  }
  if (current === wanted) return;
  // Only a link of ours is replaced or removed: a `node` another package installed there stays.
  if (current !== null && !current.includes(".kiln-runtime")) return;
  rmSync(link, { force: true });
  if (wanted !== null) {
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(wanted, link);
  }
}

/** Recorded for scripts/run-tests.mjs and run-reliability.mjs (scripts/project-runtime.mjs). */
function recordRuntime(runtime, machine, previousText) {
  const text = `${JSON.stringify({ ...runtime, machine }, null, 2)}\n`;
  if (text === previousText) return;
  const file = runtimeRecordFile(root);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(`${file}.next`, text);
  renameSync(`${file}.next`, file);
}

const previousText = existsSync(runtimeRecordFile(root)) ? readFileSync(runtimeRecordFile(root), "utf8") : null;
const previous = previousText === null ? null : JSON.parse(previousText);
ensureDebianPackages();
const machine = machineNode(previous);
const runtime = ensureRuntime(machine, previous);
ensureNpmPackages(runtime);
build();
linkWorkspaceBins();
linkRuntime(runtime);
recordRuntime(runtime, machine, previousText);
buildTestGuest();
// Quiet on success: the command that follows prints what matters.
