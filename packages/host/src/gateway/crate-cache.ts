import { randomBytes } from "node:crypto";
import { copyFile, link, mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { GatewayError } from "./gateway-error.js";

/** A partial download untouched this long belonged to a worker that was killed. */
const ABANDONED_DOWNLOAD_MS = 60 * 60 * 1000;

/** A cached crate: its verified bytes' path and the registry's index line for that version. */
export interface CachedCrate {
  readonly path: string;
  readonly indexLine: string;
  readonly bytes: number;
}

/** Where a crate may be shared: `public` (crates.io, anyone's) or one tenant's private registry. */
export type CacheScope = string;

/**
 * Fetches a crate into `file` (a temporary path beside its cache entry), returning the digest
 * and size computed as it streamed, and the registry's index line for it.
 */
export type CrateFetch = (file: string) => Promise<{ sha256: string; size: number; indexLine: string }>;

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
 * (by mtime, touched on every hit) are removed. A download streams into a file beside its entry
 * (hashed as it arrives, never held in memory) and is renamed into place once verified, so
 * several processes may fill one cache: the gateway's per-attempt workers each store into it and
 * the host agent, the one long-lived owner, does the accounting and eviction (`added`); a worker's
 * instance has no bound (`maxBytes` infinite) and never walks the cache.
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
    fetch: CrateFetch,
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

  async #store(scope: CacheScope, sha256: string, what: string, fetch: CrateFetch): Promise<CachedCrate> {
    const paths = this.#paths(scope, sha256);
    // Directories root's alone: a tenant's private crates are reachable by no other user of the
    // host. The files stay readable: an attempt's registry hard-links them, and the sandbox reads
    // those links through its launcher's binds, never through these directories.
    await mkdir(dirname(paths.crate), { recursive: true, mode: 0o700 });
    // Streamed beside and renamed into place once verified: a reader sees a whole crate or none.
    const temporary = `${paths.crate}.${process.pid}.${randomBytes(6).toString("hex")}.partial`;
    try {
      const { sha256: actual, size, indexLine } = await fetch(temporary);
      if (actual !== sha256) {
        throw new GatewayError(
          "checksum_mismatch",
          `${what}: the registry served bytes with SHA-256 ${actual}, but Cargo.lock's checksum is ${sha256}; nothing of it was used or cached`,
        );
      }
      await writeFile(paths.line, indexLine, { mode: 0o644 });
      await rename(temporary, paths.crate);
      await this.added(size);
      return { path: paths.crate, indexLine, bytes: size };
    } finally {
      await rm(temporary, { force: true });
    }
  }

  /**
   * Accounts `bytes` stored in the cache (by this instance, or by a worker process filling the
   * same directory) and evicts past the bound. An unbounded instance neither counts nor walks.
   */
  async added(bytes: number): Promise<void> {
    if (!Number.isFinite(this.maxBytes)) return;
    if (this.#totalBytes !== null) this.#totalBytes += bytes;
    await this.#evictOverBound();
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
        } else if (name.endsWith(".partial")) {
          // A download whose worker was killed (the ceiling, a cancellation) before it could clean up.
          const info = await stat(path).catch(() => null);
          if (info !== null && Date.now() - info.mtimeMs > ABANDONED_DOWNLOAD_MS) await rm(path, { force: true });
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
      await copyFile(crate.path, target);
    }
  }
}
