/**
 * What a microVM boots and mounts, built on the host once and kept in its guest directory
 * (`<data dir>/guest` unless told otherwise), each under a name that carries the key of what it
 * was built from, so a second start finds everything and builds nothing:
 *
 * - the kernel: Debian's cloud kernel (`linux-image-<release>-cloud-amd64`, the package
 *   `linux-image-cloud-amd64` depends on), taken from its .deb with `apt-get download` and
 *   `dpkg-deb -x` — never installed on the host — with the modules the guest needs: this
 *   kernel builds virtio, virtio-mmio, virtio-blk, virtio-console and erofs as modules (ext4 is
 *   built in), so they go into the initramfs with what they depend on (read from each module's
 *   own `depends=`), loaded in that order;
 * - the initramfs: the guest agent (packages/host/guest-agent, a static binary built with the
 *   host's admitted stable cargo; keyed by its source, the kernel and the compiler) as /init,
 *   and those modules;
 * - the guest root: a read-only erofs image of Debian's minbase plus what cargo needs to link
 *   and what build scripts commonly run (gcc, g++, libc6-dev, make, pkg-config), made by
 *   `debootstrap` from the Debian mirror (keyed by release and package list);
 * - one read-only erofs image per admitted toolchain (its rustup directory without its HTML
 *   documentation), keyed by the toolchain's channel manifest (which names every component's
 *   hash; a linked toolchain without one by its files' sizes and times), so an updated
 *   toolchain gets a new image.
 *
 * Every artifact is built under a temporary name and renamed into place, under a lock
 * directory, so two hosts sharing the guest directory (or a test run beside a host) never see
 * half an image and never build the same one twice. Several hosts, or checkouts, sharing the
 * directory may want different artifacts of one kind at once (two checkouts whose guest agents
 * differ each want their own initramfs): an artifact is never removed while someone may still
 * boot from it. Each use marks it (its mtime: found by `ensure`, and at every attempt,
 * `markInUse`), and a newer artifact of its kind removes it only once it has gone unused for
 * `SUPERSEDED_RETENTION_MS`.
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { AdmittedToolchain } from "../executor.js";
import { listAdmittedToolchains } from "../shared/admit-toolchains.js";
import { type InitramfsEntry, newcArchive } from "./initramfs.js";

const run = promisify(execFile);

/** The guest agent's sources, shipped beside the host's build (dist/src/executor/microvm → packages/host/guest-agent). */
const AGENT_SOURCE = new URL("../../../../guest-agent/", import.meta.url).pathname;

/** The modules the guest agent needs the kernel to have, by name; what each depends on comes too. */
const NEEDED_MODULES = ["virtio_mmio", "virtio_blk", "virtio_console", "erofs"];

/** The Debian packages of the guest root beyond minbase: a C toolchain for linking, and what build scripts commonly run. */
const ROOT_PACKAGES = ["gcc", "g++", "libc6-dev", "make", "pkg-config"];

/** The Debian mirror the guest root is installed from unless told otherwise. */
export const DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian";

/** How long a build waits for another process's lock before taking it over as stale. */
const LOCK_STALE_MS = 30 * 60 * 1000;

/**
 * How long a superseded artifact is kept after its last use: another host or checkout sharing
 * the directory may still boot from it (a host marks what it uses at every attempt), and one
 * idle for a week that wants it again builds it again.
 */
export const SUPERSEDED_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

export interface GuestImagesOptions {
  /** The guest directory (`<data dir>/guest`, or one several hosts share). */
  readonly directory: string;
  /** The Debian mirror for the guest root (`KILN_MICROVM_DEBIAN_MIRROR`). */
  readonly mirror?: string;
  /** Lines saying what is being built (a build takes minutes: the host's log shows them). */
  readonly log?: (line: string) => void;
}

/** What a microVM boots: the kernel, its release, the initramfs and the guest root image. */
export interface GuestBoot {
  readonly kernel: string;
  readonly kernelRelease: string;
  readonly initramfs: string;
  readonly root: string;
}

/** One artifact as `ensure` left it: found in place, or built now. */
export interface GuestArtifact {
  readonly name: string;
  readonly path: string;
  readonly built: boolean;
}

const key = (...parts: readonly (string | Buffer)[]) => {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part).update("\0");
  return hash.digest("hex").slice(0, 16);
};

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Runs a command, its output kept for the error it throws. */
async function command(file: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  try {
    return await run(file, [...args], { maxBuffer: 64 * 2 ** 20, ...options });
  } catch (error) {
    const failed = error as { stderr?: string; stdout?: string; message: string };
    const output = `${failed.stderr ?? ""}${failed.stdout ?? ""}`.trim().slice(-2000);
    throw new Error(`${file} ${args.slice(0, 3).join(" ")}… failed: ${output || failed.message}`);
  }
}

/** A module's own `depends=` (the comma-separated modules it needs loaded first), from its .modinfo strings. */
export function moduleDependencies(module: Buffer): string[] {
  const at = module.indexOf("\0depends=");
  if (at < 0) return [];
  const end = module.indexOf(0, at + 1);
  const value = module.subarray(at + "\0depends=".length, end).toString("utf8");
  return value.split(",").filter((d) => d !== "");
}

export class GuestImages {
  readonly #building = new Map<string, Promise<GuestArtifact>>();

  constructor(readonly options: GuestImagesOptions) {}

  get directory(): string {
    return this.options.directory;
  }

  #log(line: string): void {
    this.options.log?.(line);
  }

  /** The kernel, initramfs and guest root: found, or built once. */
  async ensureBoot(): Promise<{ boot: GuestBoot; artifacts: GuestArtifact[] }> {
    const kernel = await this.ensureKernel();
    const release = kernel.name.replace(/^kernel /, "");
    const initramfs = await this.ensureInitramfs(kernel.path, release);
    const root = await this.ensureRoot();
    return {
      boot: {
        kernel: join(kernel.path, "vmlinuz"),
        kernelRelease: release,
        initramfs: initramfs.path,
        root: root.path,
      },
      artifacts: [kernel, initramfs, root],
    };
  }

  /** Debian's cloud kernel and the modules the guest loads, in `kernel-<release>/`. */
  async ensureKernel(): Promise<GuestArtifact> {
    const release = await this.#kernelRelease();
    const directory = join(this.directory, `kernel-${release}`);
    return this.#once(
      `kernel ${release}`,
      directory,
      join(directory, "complete"),
      async (building) => {
        this.#log(`guest kernel: downloading linux-image-${release} from Debian (apt-get download, dpkg-deb -x)`);
        await command("apt-get", ["download", `linux-image-${release}`], { cwd: building });
        const deb = (await readdir(building)).find((f) => f.endsWith(".deb"));
        if (deb === undefined) throw new Error(`apt-get download left no .deb of linux-image-${release}`);
        const extracted = join(building, "x");
        await command("dpkg-deb", ["-x", join(building, deb), extracted]);
        const modulesRoot = join(extracted, "lib", "modules", release);
        const modules = await this.#neededModules(modulesRoot);
        const out = join(building, "out");
        await mkdir(join(out, "modules"), { recursive: true });
        await writeFile(join(out, "vmlinuz"), await readFile(join(extracted, "boot", `vmlinuz-${release}`)));
        for (const [name, path] of modules) await writeFile(join(out, "modules", `${name}.ko`), await readFile(path));
        await writeFile(join(out, "modules", "order"), `${modules.map(([name]) => `${name}.ko`).join("\n")}\n`);
        await writeFile(join(out, "complete"), `${deb}\n`);
        return out;
      },
      "kernel-",
    );
  }

  /**
   * The newest kernel already here; only when there is none, the release `linux-image-cloud-amd64`
   * depends on now (asking apt loads its whole package cache: seconds on a busy host, at every
   * start). To take a newer kernel, remove the guest directory's `kernel-*`: the next start
   * downloads the current one (and builds an initramfs for it).
   */
  async #kernelRelease(): Promise<string> {
    const present = (await readdir(this.directory).catch(() => [] as string[]))
      .filter((d) => d.startsWith("kernel-") && !d.endsWith(".lock"))
      .sort();
    const newest = present.at(-1);
    if (newest !== undefined && (await exists(join(this.directory, newest, "complete"))))
      return newest.slice("kernel-".length);
    const { stdout } = await run("apt-cache", ["depends", "linux-image-cloud-amd64"]).catch(() => ({ stdout: "" }));
    const release = /Depends: linux-image-(\S+-cloud-amd64)/.exec(stdout)?.[1];
    if (release === undefined)
      throw new Error("no guest kernel here, and apt-cache names no linux-image-cloud-amd64 to download");
    return release;
  }

  /** The needed modules and everything they depend on, dependencies first; built-in ones skipped. */
  async #neededModules(modulesRoot: string): Promise<[string, string][]> {
    const builtin = new Set(
      (await readFile(join(modulesRoot, "modules.builtin"), "utf8").catch(() => ""))
        .split("\n")
        .map((line) => line.split("/").at(-1)?.replace(/\.ko$/, "") ?? ""),
    );
    const found = new Map<string, string>();
    const walk = async (directory: string): Promise<void> => {
      for (const entry of await readdir(directory, { withFileTypes: true })) {
        const path = join(directory, entry.name);
        if (entry.isDirectory()) await walk(path);
        else if (entry.name.endsWith(".ko")) found.set(entry.name.slice(0, -3).replaceAll("-", "_"), path);
      }
    };
    await walk(join(modulesRoot, "kernel"));
    const ordered: [string, string][] = [];
    const visit = async (name: string, chain: readonly string[]): Promise<void> => {
      const normalized = name.replaceAll("-", "_");
      if (ordered.some(([n]) => n === normalized) || builtin.has(normalized)) return;
      if (chain.includes(normalized)) throw new Error(`module dependency cycle: ${[...chain, normalized].join(" → ")}`);
      const path = found.get(normalized);
      if (path === undefined) throw new Error(`the kernel has neither a built-in nor a module ${normalized}`);
      for (const dependency of moduleDependencies(await readFile(path)))
        await visit(dependency, [...chain, normalized]);
      ordered.push([normalized, path]);
    };
    for (const name of NEEDED_MODULES) await visit(name, []);
    return ordered;
  }

  /** The guest agent built for this kernel, as /init, with the kernel's modules. */
  async ensureInitramfs(kernelDirectory: string, release: string): Promise<GuestArtifact> {
    const toolchain = await buildToolchain();
    const sources = await Promise.all(
      ["Cargo.toml", "Cargo.lock", join("src", "main.rs")].map((f) => readFile(join(AGENT_SOURCE, f))),
    );
    const file = join(
      this.directory,
      `initramfs-${key(release, toolchain.version ?? toolchain.name, ...sources)}.cpio`,
    );
    return this.#once(
      "initramfs",
      file,
      file,
      async (building) => {
        this.#log(`guest agent: building with ${toolchain.name} (cargo build --release, statically linked)`);
        await command(
          join(toolchain.path, "bin", "cargo"),
          ["build", "--release", "--locked", "--offline", "--target", "x86_64-unknown-linux-gnu"],
          {
            cwd: AGENT_SOURCE,
            env: {
              PATH: `${join(toolchain.path, "bin")}:/usr/bin:/bin`,
              HOME: building,
              CARGO_HOME: join(building, "cargo-home"),
              CARGO_TARGET_DIR: join(building, "target"),
              RUSTC: join(toolchain.path, "bin", "rustc"),
              RUSTFLAGS: "-C target-feature=+crt-static",
            },
          },
        );
        const agent = await readFile(
          join(building, "target", "x86_64-unknown-linux-gnu", "release", "kiln-guest-agent"),
        );
        const modules = join(kernelDirectory, "modules");
        const order = (await readFile(join(modules, "order"), "utf8")).split("\n").filter((l) => l !== "");
        const entries: InitramfsEntry[] = [
          ...["dev", "proc", "sys", "lib", "lib/modules"].map((path) => ({
            path,
            kind: "directory" as const,
            mode: 0o755,
          })),
          { path: "init", kind: "file", mode: 0o755, content: agent },
          { path: "lib/modules/order", kind: "file", mode: 0o644, content: Buffer.from(`${order.join("\n")}\n`) },
        ];
        for (const name of order)
          entries.push({
            path: `lib/modules/${name}`,
            kind: "file",
            mode: 0o644,
            content: await readFile(join(modules, name)),
          });
        const out = join(building, "initramfs.cpio");
        await writeFile(out, newcArchive(entries));
        return out;
      },
      "initramfs-",
    );
  }

  /** The read-only guest root: Debian minbase and the C toolchain, from debootstrap. */
  async ensureRoot(): Promise<GuestArtifact> {
    const suite = await debianSuite();
    const mirror = this.options.mirror ?? DEFAULT_DEBIAN_MIRROR;
    const file = join(this.directory, `root-${key(suite, "minbase", ...ROOT_PACKAGES)}.erofs`);
    return this.#once(
      "guest root",
      file,
      file,
      async (building) => {
        this.#log(
          `guest root: installing Debian ${suite} minbase with ${ROOT_PACKAGES.join(", ")} from ${mirror} (debootstrap; minutes, once)`,
        );
        const tree = join(building, "root");
        await command("debootstrap", [
          "--variant=minbase",
          `--include=${ROOT_PACKAGES.join(",")}`,
          suite,
          tree,
          mirror,
        ]);
        // What no job reads: package lists and caches, documentation, translations.
        for (const path of [
          "var/cache/apt",
          "var/lib/apt/lists",
          "usr/share/doc",
          "usr/share/man",
          "usr/share/info",
          "usr/share/locale",
        ])
          await rm(join(tree, path), { recursive: true, force: true });
        // The agent binds its own identity files over these, which must exist to be bound over.
        for (const name of ["passwd", "group", "hosts"])
          if (!(await exists(join(tree, "etc", name)))) await writeFile(join(tree, "etc", name), "");
        const out = join(building, "root.erofs");
        await command("mkfs.erofs", ["--quiet", out, tree]);
        return out;
      },
      "root-",
    );
  }

  /** The read-only image of one admitted toolchain, built when its content changed (older images of it removed once long unused). */
  async ensureToolchain(toolchain: AdmittedToolchain): Promise<GuestArtifact> {
    const name = toolchain.name.replace(/[^A-Za-z0-9_.-]/g, "_");
    const directory = join(this.directory, "toolchains");
    const file = join(directory, `${name}-${await toolchainKey(toolchain.path)}.erofs`);
    return this.#once(
      `toolchain ${toolchain.name}`,
      file,
      file,
      async (building) => {
        this.#log(
          `toolchain image: ${toolchain.name} from ${toolchain.path} (mkfs.erofs, without its HTML documentation)`,
        );
        const out = join(building, "toolchain.erofs");
        await command("mkfs.erofs", ["--quiet", "--all-root", "--exclude-path=share/doc", out, toolchain.path]);
        return out;
      },
      `${name}-`,
    );
  }

  /** Marks artifacts as used now (their mtime), so no newer artifact of their kind removes them for a while. */
  async markInUse(paths: readonly string[]): Promise<void> {
    const now = new Date();
    await Promise.all(paths.map((path) => utimes(path, now, now).catch(() => undefined)));
  }

  /**
   * `path` when `marker` exists; otherwise builds it once (in this process and across processes
   * sharing the directory), `build` working in a fresh directory and returning what becomes `path`.
   */
  #once(
    name: string,
    path: string,
    marker: string,
    build: (building: string) => Promise<string>,
    /** Artifacts of the same kind (`initramfs-`, `root-`, …), removed once this one is built if unused for long. */
    superseded: string,
  ): Promise<GuestArtifact> {
    let pending = this.#building.get(path);
    if (pending === undefined) {
      pending = (async () => {
        if (await exists(marker)) {
          await this.markInUse([path]);
          return { name, path, built: false };
        }
        await mkdir(dirname(path), { recursive: true });
        const release = await this.#lock(path);
        try {
          // Another process may have built it while we waited for the lock.
          if (await exists(marker)) return { name, path, built: false };
          const building = join(this.directory, `.building-${randomBytes(6).toString("hex")}`);
          await mkdir(building, { recursive: true });
          try {
            const started = Date.now();
            const out = await build(building);
            await rm(path, { recursive: true, force: true });
            await rename(out, path);
            this.#log(
              `${name}: built in ${((Date.now() - started) / 1000).toFixed(1)} s (${relative(this.directory, path)})`,
            );
            await this.#removeSuperseded(path, superseded);
            return { name, path, built: true };
          } finally {
            await rm(building, { recursive: true, force: true });
          }
        } finally {
          await release();
        }
      })();
      this.#building.set(path, pending);
      // Shared only while under way: a later caller finds the artifact in place (or, after a
      // failure, tries again: the operator may have fixed the machine).
      const settled = () => this.#building.delete(path);
      pending.then(settled, settled);
    }
    return pending;
  }

  /**
   * Removes the artifacts `path` replaces that nobody has used for `SUPERSEDED_RETENTION_MS`: its
   * siblings named with the same prefix. One used more recently may be another host's or
   * checkout's current artifact (two checkouts with different guest agents share a test guest
   * directory): removing it would pull it from under a boot. Never a lock or a build under way.
   */
  async #removeSuperseded(path: string, prefix: string): Promise<void> {
    const directory = dirname(path);
    const unusedSince = Date.now() - SUPERSEDED_RETENTION_MS;
    for (const entry of await readdir(directory)) {
      const full = join(directory, entry);
      if (!entry.startsWith(prefix) || full === path || entry.endsWith(".lock")) continue;
      const lastUse = (await stat(full).catch(() => null))?.mtimeMs;
      if (lastUse !== undefined && lastUse < unusedSince) {
        await rm(full, { recursive: true, force: true });
        this.#log(
          `${relative(this.directory, full)}: removed, superseded and unused since ${new Date(lastUse).toISOString()}`,
        );
      }
    }
  }

  /** A lock directory beside `path` holding its owner's pid; a dead owner's, or one older than a build could take, is taken over. */
  async #lock(path: string): Promise<() => Promise<void>> {
    const lock = `${path}.lock`;
    for (;;) {
      try {
        await mkdir(lock);
        await writeFile(join(lock, "pid"), String(process.pid));
        return () => rm(lock, { recursive: true, force: true });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      const owner = Number(await readFile(join(lock, "pid"), "utf8").catch(() => "0"));
      const age = Date.now() - ((await stat(lock).catch(() => null))?.mtimeMs ?? 0);
      if ((owner > 0 && !processAlive(owner)) || age > LOCK_STALE_MS) {
        await rm(lock, { recursive: true, force: true });
        continue;
      }
      await sleep(500);
    }
  }
}

/** The toolchain the guest agent is built with: the host's admitted stable one (any admitted one otherwise). */
async function buildToolchain(): Promise<AdmittedToolchain & { version: string | null }> {
  const admitted = await listAdmittedToolchains();
  const chosen = admitted.find((t) => t.name.startsWith("stable-")) ?? admitted[0];
  if (chosen === undefined) throw new Error("no rustup toolchain is installed to build the guest agent with");
  return chosen;
}

/** The host's Debian release name (the guest root's), from /etc/os-release. */
async function debianSuite(): Promise<string> {
  const text = await readFile("/etc/os-release", "utf8").catch(() => "");
  return /^VERSION_CODENAME=(\w+)/m.exec(text)?.[1] ?? "bookworm";
}

/**
 * What a toolchain's image is keyed by: its channel manifest (which records every installed
 * component and its hash), else — a linked toolchain — every file's path, size and mtime.
 */
export async function toolchainKey(path: string): Promise<string> {
  const manifest = await readFile(join(path, "lib", "rustlib", "multirust-channel-manifest.toml")).catch(() => null);
  const components = await readFile(join(path, "lib", "rustlib", "components")).catch(() => null);
  if (manifest !== null) return key("manifest", manifest, components ?? "");
  const listing: string[] = [];
  const walk = async (directory: string): Promise<void> => {
    for (const entry of await readdir(directory, { withFileTypes: true })) {
      const full = join(directory, entry.name);
      if (entry.isDirectory()) await walk(full);
      else {
        const stats = await stat(full).catch(() => null);
        listing.push(`${relative(path, full).split(sep).join("/")} ${stats?.size ?? "?"} ${stats?.mtimeMs ?? "?"}`);
      }
    }
  };
  await walk(path);
  return key("files", ...listing.sort());
}
