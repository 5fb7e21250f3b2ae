import { createHash } from "node:crypto";
import { link, mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { GatewayError } from "./gateway-error.js";

/** A cached crate: its verified bytes' path and the registry's index line for that version. */
export interface CachedCrate {
  readonly path: string;
  readonly indexLine: string;
  readonly bytes: number;
}

/** Where a crate may be shared: `public` (crates.io, anyone's) or one tenant's private registry. */
export type CacheScope = string;

/**
 * The host's content-addressed crate cache: `<root>/<scope>/<sha[0:2]>/<sha>.crate` with the
 * index line beside it. A crate is stored only after its bytes hashed to the checksum its
 * Cargo.lock names, so an entry is always what every lock naming that checksum expects and
 * is never downloaded again, whoever asks. crates.io's crates live in one public scope; a
 * private registry's crates in their tenant's scope, so another tenant's job never gets them
 * (it has to fetch them, with its own credential). Concurrent jobs needing the same crate
 * share one download: the same checksum asked for as the same crate (`what`: name, version
 * and registry). A fetch asked for as another crate is not shared, because it can fail where
 * the real one would not — a lock naming crate X under crate Y's checksum fails its check —
 * and a job joining it would fail with it and read, in its error, what the other job's lock
 * names (found by reliability trial T3). The cache is bounded: past `maxBytes` the least recently used entries
 * (by mtime, touched on every hit) are removed.
 */
export class CrateCache {
  readonly #inFlight = new Map<string, Promise<CachedCrate>>();
  #totalBytes: number | null = null;
  /** The first count's walk, shared by every caller while it runs. */
  #counting: Promise<number> | null = null;
  #evicting: Promise<void> | null = null;

  constructor(
    readonly root: string,
    readonly maxBytes: number,
  ) {}

  #paths(scope: CacheScope, sha256: string) {
    const crate = join(this.root, scope, sha256.slice(0, 2), `${sha256}.crate`);
    return { crate, line: `${crate.slice(0, -".crate".length)}.index.json` };
  }

  /** The cached crate, touched as recently used; null on a miss. */
  async lookup(scope: CacheScope, sha256: string): Promise<CachedCrate | null> {
    const paths = this.#paths(scope, sha256);
    try {
      const [info, indexLine] = await Promise.all([stat(paths.crate), readFile(paths.line, "utf8")]);
      const now = new Date();
      await utimes(paths.crate, now, now).catch(() => undefined);
      return { path: paths.crate, indexLine, bytes: info.size };
    } catch {
      return null;
    }
  }

  /**
   * The crate from the cache, or from `fetch` once per scope, checksum and crate (`what`)
   * however many callers ask at the same time. Bytes that do not hash to `sha256` are refused and nothing
   * is stored. `fetched` tells the caller whether this call downloaded it.
   */
  async obtain(
    scope: CacheScope,
    sha256: string,
    what: string,
    fetch: () => Promise<{ bytes: Uint8Array; indexLine: string }>,
  ): Promise<CachedCrate & { fetched: boolean }> {
    const hit = await this.lookup(scope, sha256);
    if (hit !== null) return { ...hit, fetched: false };
    const key = `${scope}/${sha256}/${what}`;
    let pending = this.#inFlight.get(key);
    let mine = false;
    if (pending === undefined) {
      mine = true;
      pending = this.#store(scope, sha256, what, fetch).finally(() => this.#inFlight.delete(key));
      this.#inFlight.set(key, pending);
    }
    return { ...(await pending), fetched: mine };
  }

  async #store(
    scope: CacheScope,
    sha256: string,
    what: string,
    fetch: () => Promise<{ bytes: Uint8Array; indexLine: string }>,
  ): Promise<CachedCrate> {
    const { bytes, indexLine } = await fetch();
    const actual = createHash("sha256").update(bytes).digest("hex");
    if (actual !== sha256) {
      throw new GatewayError(
        "checksum_mismatch",
        `${what}: the registry served bytes with SHA-256 ${actual}, but Cargo.lock's checksum is ${sha256}; nothing of it was used or cached`,
      );
    }
    const paths = this.#paths(scope, sha256);
    // Directories root's alone: a tenant's private crates are reachable by no other user of the
    // host. The files stay readable: an attempt's registry hard-links them, and the sandbox reads
    // those links through its launcher's binds, never through these directories.
    await mkdir(dirname(paths.crate), { recursive: true, mode: 0o700 });
    // Written beside and renamed into place: a reader sees a whole crate or none.
    const temporary = `${paths.crate}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    await writeFile(temporary, bytes, { mode: 0o644 });
    await writeFile(paths.line, indexLine, { mode: 0o644 });
    await rename(temporary, paths.crate);
    if (this.#totalBytes !== null) this.#totalBytes += bytes.length;
    await this.#evictOverBound();
    return { path: paths.crate, indexLine, bytes: bytes.length };
  }

  /** Bytes of every cached crate (scanned once, then kept up to date). */
  async totalBytes(): Promise<number> {
    if (this.#totalBytes !== null) return this.#totalBytes;
    this.#counting ??= this.#entries().then((entries) => {
      const total = entries.reduce((sum, e) => sum + e.bytes, 0);
      // Stores that finished during the walk were counted by it; later ones add themselves.
      this.#totalBytes = total;
      this.#counting = null;
      return total;
    });
    return this.#counting;
  }

  async #entries(): Promise<{ path: string; bytes: number; usedMs: number }[]> {
    const found: { path: string; bytes: number; usedMs: number }[] = [];
    const walk = async (dir: string): Promise<void> => {
      let names: string[];
      try {
        names = await readdir(dir);
      } catch {
        return;
      }
      for (const name of names) {
        const path = join(dir, name);
        if (name.endsWith(".crate")) {
          const info = await stat(path).catch(() => null);
          if (info !== null) found.push({ path, bytes: info.size, usedMs: info.mtimeMs });
        } else if (!name.includes(".")) await walk(path);
      }
    };
    await walk(this.root);
    return found;
  }

  async #evictOverBound(): Promise<void> {
    if ((await this.totalBytes()) <= this.maxBytes) return;
    this.#evicting ??= (async () => {
      const entries = (await this.#entries()).sort((a, b) => a.usedMs - b.usedMs);
      let total = entries.reduce((sum, e) => sum + e.bytes, 0);
      for (const entry of entries) {
        if (total <= this.maxBytes) break;
        // A job that already linked the crate into its local registry keeps its link.
        await rm(entry.path, { force: true });
        await rm(`${entry.path.slice(0, -".crate".length)}.index.json`, { force: true });
        total -= entry.bytes;
      }
      this.#totalBytes = total;
    })().finally(() => {
      this.#evicting = null;
    });
    await this.#evicting;
  }

  /** Puts a cached crate at `target` (a hard link when on the same file system, else a copy). */
  static async place(crate: CachedCrate, target: string): Promise<void> {
    try {
      await link(crate.path, target);
    } catch {
      await writeFile(target, await readFile(crate.path), { mode: 0o644 });
    }
  }
}
