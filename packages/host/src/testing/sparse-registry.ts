import { createHash } from "node:crypto";
import type { Dirent } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { parse } from "smol-toml";

/**
 * A real HTTP sparse Cargo registry on 127.0.0.1, serving crates built from Debian's
 * `librust-*-dev` sources: the upstream "crates.io" and private registries of tests and
 * benchmarks, so cargo itself can resolve and download without the network. For tests of
 * this package and of the server; not part of the host's runtime surface.
 */

export interface SparseRegistryOptions {
  /** Crate directory names or crate names under the source root; the fixture adds each one's normal and build dependencies transitively (and dev-dependencies of the ones named here), skipping those not present. */
  readonly crates: readonly string[];
  /** Where .crate files are built (cached by directory content is fine); default a temp dir. */
  readonly workDir?: string;
  /** Default /usr/share/cargo/registry */
  readonly sourceRoot?: string;
  /** When set, every request (config.json, index, downloads) must carry `Authorization: <value>` exactly, else 401 (like an `auth-required` registry). config.json then has "auth-required": true. */
  readonly authorization?: string;
}

export interface SparseRegistryCrate {
  readonly version: string;
  readonly checksum: string;
  readonly bytes: number;
}

/** A dependency some served crate declares that the source root does not hold (never served). */
export interface SkippedDependency {
  /** `name@version` of the crate declaring it */
  readonly crate: string;
  /** The real crate name (the `package` of a renamed dependency) */
  readonly dependency: string;
  readonly kind: DependencyKind;
}

export interface SparseRegistry {
  /** `sparse+http://127.0.0.1:<port>/index/` — what KILN_CRATES_IO_INDEX or a [registries] index takes */
  readonly indexUrl: string;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** name → versions with their sha256 checksum of the .crate bytes served */
  readonly crates: ReadonlyMap<string, readonly SparseRegistryCrate[]>;
  /** Dependencies left out because the source root lacks them (cargo fails only if it needs one). */
  readonly skipped: readonly SkippedDependency[];
  /** Every request path served so far (for "downloaded 0 bytes" assertions), and download bytes sent. */
  readonly requests: readonly string[];
  downloadBytes(): number;
  /** Serve these bytes instead of the real .crate for name@version from now on (checksum mismatch tests). */
  tamper(name: string, version: string, bytes: Uint8Array): void;
  /** Marks name@version yanked in the index from now on (its download stays, as on crates.io). */
  yank(name: string, version: string): void;
  close(): Promise<void>;
}

type DependencyKind = "normal" | "build" | "dev";

interface IndexDependency {
  name: string;
  req: string;
  features: string[];
  optional: boolean;
  default_features: boolean;
  target: string | null;
  kind: DependencyKind;
  registry: null;
  package?: string;
}

interface IndexEntry {
  name: string;
  vers: string;
  deps: IndexDependency[];
  cksum: string;
  features: Record<string, string[]>;
  features2?: Record<string, string[]>;
  v?: 2;
  yanked: boolean;
  links: string | null;
  rust_version?: string;
}

interface SourceCrate {
  readonly dir: string;
  readonly name: string;
  readonly version: string;
  readonly manifest: Record<string, unknown>;
}

interface ServedCrate {
  readonly name: string;
  readonly version: string;
  readonly entry: IndexEntry;
  readonly bytes: Buffer;
}

const DEFAULT_SOURCE_ROOT = "/usr/share/cargo/registry";
const DOWNLOAD_PREFIX = "/api/v1/crates/";
// Directory recursion inside one crate; Debian's sources are a few levels deep, and a bound
// keeps a symlink cycle from looping.
const MAX_DEPTH = 32;

/** The path of a crate's file in cargo's index layout (1/, 2/, 3/<c>/, <ab>/<cd>/), lowercase. */
export function sparseIndexPath(name: string): string {
  const lower = name.toLowerCase();
  if (lower.length <= 2) return `${lower.length}/${lower}`;
  if (lower.length === 3) return `3/${lower.slice(0, 1)}/${lower}`;
  return `${lower.slice(0, 2)}/${lower.slice(2, 4)}/${lower}`;
}

export async function startSparseRegistry(options: SparseRegistryOptions): Promise<SparseRegistry> {
  const sourceRoot = options.sourceRoot ?? DEFAULT_SOURCE_ROOT;
  const ownsWorkDir = options.workDir === undefined;
  const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), "kiln-sparse-registry-")));
  try {
    const { sources, skipped } = await collectCrates(sourceRoot, options.crates);
    await mkdir(workDir, { recursive: true });
    const served: ServedCrate[] = [];
    for (const source of sources) {
      const bytes = await buildCrateFile(source, workDir);
      const cksum = createHash("sha256").update(bytes).digest("hex");
      served.push({ name: source.name, version: source.version, entry: indexEntry(source, cksum), bytes });
    }
    served.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : compareVersions(a.version, b.version)));
    return await serve(served, skipped, options.authorization, async () => {
      if (ownsWorkDir) await rm(workDir, { recursive: true, force: true });
    });
  } catch (error) {
    if (ownsWorkDir) await rm(workDir, { recursive: true, force: true });
    throw error;
  }
}

// ---- choosing the crates ------------------------------------------------------------------

// crates.io treats `-` and `_` alike in names and ignores case, so lookups here do too.
const lookupKey = (name: string) => name.toLowerCase().replaceAll("_", "-");

async function collectCrates(
  sourceRoot: string,
  requested: readonly string[],
): Promise<{ sources: SourceCrate[]; skipped: SkippedDependency[] }> {
  let entries: Dirent[];
  try {
    entries = await readdir(sourceRoot, { withFileTypes: true });
  } catch (error) {
    throw new Error(`sparse registry: cannot read the crate source root ${sourceRoot}: ${String(error)}`);
  }
  // Debian names each directory `<name>-<version>`; the name is confirmed from Cargo.toml
  // when the crate is loaded.
  const dirsByName = new Map<string, string[]>();
  const dirNames = new Set<string>();
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const match = /^(.+?)-(\d+\.\d+\.\d+(?:[-+].*)?)$/.exec(entry.name);
    if (match === null || match[1] === undefined) continue;
    dirNames.add(entry.name);
    const key = lookupKey(match[1]);
    dirsByName.set(key, [...(dirsByName.get(key) ?? []), entry.name]);
  }

  const queue: { dir: string; withDev: boolean }[] = [];
  for (const name of requested) {
    const dirs = dirNames.has(name) ? [name] : (dirsByName.get(lookupKey(name)) ?? []);
    if (dirs.length === 0) {
      throw new Error(
        `sparse registry: no crate "${name}" under ${sourceRoot}; install Debian's librust-${lookupKey(name)}-dev`,
      );
    }
    for (const dir of dirs) queue.push({ dir, withDev: true });
  }

  // Breadth-first over a finite set of directories, each loaded once; the named crates come
  // first in the queue, so their dev-dependencies are taken before anything reaches them.
  const loaded = new Map<string, SourceCrate>();
  const skipped: SkippedDependency[] = [];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    if (loaded.has(next.dir)) continue;
    const source = await loadSource(join(sourceRoot, next.dir));
    loaded.set(next.dir, source);
    for (const dep of manifestDependencies(source.manifest)) {
      if (dep.kind === "dev" && !next.withDev) continue;
      const realName = dep.package ?? dep.name;
      const dirs = dirsByName.get(lookupKey(realName));
      if (dirs === undefined) {
        skipped.push({ crate: `${source.name}@${source.version}`, dependency: realName, kind: dep.kind });
        continue;
      }
      for (const dir of dirs) if (!loaded.has(dir)) queue.push({ dir, withDev: false });
    }
  }
  return { sources: [...loaded.values()], skipped };
}

async function loadSource(dir: string): Promise<SourceCrate> {
  const text = await readFile(join(dir, "Cargo.toml"), "utf8");
  const manifest = parse(text) as Record<string, unknown>;
  const pkg = table(manifest.package);
  const name = pkg?.name;
  const version = pkg?.version;
  if (typeof name !== "string" || typeof version !== "string") {
    throw new Error(`sparse registry: ${dir}/Cargo.toml has no [package] name and version`);
  }
  return { dir, name, version, manifest };
}

// ---- the index entry ----------------------------------------------------------------------

function table(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];

// Normalized manifests use the dashed spellings; older ones may still carry the underscored.
const SECTIONS: readonly (readonly [string, DependencyKind])[] = [
  ["dependencies", "normal"],
  ["build-dependencies", "build"],
  ["build_dependencies", "build"],
  ["dev-dependencies", "dev"],
  ["dev_dependencies", "dev"],
];

function manifestDependencies(manifest: Record<string, unknown>): IndexDependency[] {
  const deps: IndexDependency[] = [];
  const addSection = (holder: Record<string, unknown>, target: string | null) => {
    for (const [section, kind] of SECTIONS) {
      for (const [key, spec] of Object.entries(table(holder[section]) ?? {})) {
        deps.push(indexDependency(key, spec, kind, target));
      }
    }
  };
  addSection(manifest, null);
  for (const [target, holder] of Object.entries(table(manifest.target) ?? {})) {
    addSection(table(holder) ?? {}, target);
  }
  return deps;
}

function indexDependency(key: string, spec: unknown, kind: DependencyKind, target: string | null): IndexDependency {
  const detail = table(spec);
  const req = typeof spec === "string" ? spec : typeof detail?.version === "string" ? detail.version : "*";
  const defaultFeatures = detail?.["default-features"] ?? detail?.default_features;
  const dep: IndexDependency = {
    name: key,
    req,
    features: strings(detail?.features),
    optional: detail?.optional === true,
    default_features: defaultFeatures !== false,
    target,
    kind,
    registry: null,
  };
  if (typeof detail?.package === "string" && detail.package !== key) dep.package = detail.package;
  return dep;
}

function indexEntry(source: SourceCrate, cksum: string): IndexEntry {
  const pkg = table(source.manifest.package) ?? {};
  // Features written with `dep:` or `?/` go in features2 so older cargos skip the version
  // instead of misreading it (cargo's index format, "v": 2).
  const features: Record<string, string[]> = {};
  const features2: Record<string, string[]> = {};
  for (const [feature, values] of Object.entries(table(source.manifest.features) ?? {})) {
    const list = strings(values);
    const newSyntax = list.some((v) => v.startsWith("dep:") || v.includes("?/"));
    (newSyntax ? features2 : features)[feature] = list;
  }
  const entry: IndexEntry = {
    name: source.name,
    vers: source.version,
    deps: manifestDependencies(source.manifest),
    cksum,
    features,
    yanked: false,
    links: typeof pkg.links === "string" ? pkg.links : null,
  };
  if (Object.keys(features2).length > 0) {
    entry.features2 = features2;
    entry.v = 2;
  }
  if (typeof pkg["rust-version"] === "string") entry.rust_version = pkg["rust-version"];
  return entry;
}

// Orders release numbers numerically and a pre-release before its release; enough to list
// versions in a stable, readable order (cargo itself does not depend on the order).
function compareVersions(a: string, b: string): number {
  const split = (v: string) => {
    const [core = "", pre] = v.split("+", 1)[0]?.split(/-(.*)/s) ?? [];
    return { nums: core.split(".").map(Number), pre };
  };
  const x = split(a);
  const y = split(b);
  for (let i = 0; i < 3; i += 1) {
    const d = (x.nums[i] ?? 0) - (y.nums[i] ?? 0);
    if (d !== 0) return d;
  }
  if (x.pre === undefined || y.pre === undefined) return x.pre === y.pre ? 0 : x.pre === undefined ? 1 : -1;
  return x.pre.localeCompare(y.pre);
}

// ---- the .crate file ----------------------------------------------------------------------

interface CrateFile {
  readonly path: string;
  readonly data: Buffer;
  readonly executable: boolean;
}

// Debian's own bookkeeping, not part of the crate cargo packaged.
const EXCLUDED_AT_ROOT = new Set([".cargo-checksum.json", "debian"]);

async function crateFiles(root: string): Promise<CrateFile[]> {
  const files: CrateFile[] = [];
  const walk = async (dir: string, relative: string, depth: number): Promise<void> => {
    if (depth > MAX_DEPTH) throw new Error(`sparse registry: ${dir} is nested deeper than ${MAX_DEPTH} directories`);
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (depth === 0 && EXCLUDED_AT_ROOT.has(entry.name)) continue;
      const abs = join(dir, entry.name);
      const path = relative === "" ? entry.name : `${relative}/${entry.name}`;
      // Symlinks are followed, as `cargo package` does; anything else that is not a regular
      // file or directory has no place in a .crate.
      const info = await stat(abs);
      if (info.isDirectory()) await walk(abs, path, depth + 1);
      else if (info.isFile()) files.push({ path, data: await readFile(abs), executable: (info.mode & 0o111) !== 0 });
    }
  };
  await walk(root, "", 0);
  // Byte order of the paths, so the archive (and its checksum) is the same on every run.
  return files.sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
}

/**
 * The gzip'd tar cargo downloads: every path under `<name>-<version>/`, entries sorted,
 * mtime 0, uid/gid 0, so the checksum depends on the content alone. Cached in `workDir` by
 * the digest of the uncompressed tar, so a rerun serves the very bytes it served before.
 */
async function buildCrateFile(source: SourceCrate, workDir: string): Promise<Buffer> {
  const prefix = `${source.name}-${source.version}`;
  const blocks: Buffer[] = [];
  for (const file of await crateFiles(source.dir)) {
    blocks.push(...tarEntry(`${prefix}/${file.path}`, file.data, file.executable ? 0o755 : 0o644));
  }
  blocks.push(Buffer.alloc(1024));
  const tar = Buffer.concat(blocks);
  const key = createHash("sha256").update(tar).digest("hex").slice(0, 16);
  const cached = join(workDir, `${prefix}-${key}.crate`);
  try {
    return await readFile(cached);
  } catch {
    const bytes = await promisify(gzip)(tar, { level: 9 });
    // Written aside then renamed, so a concurrent fixture sharing workDir never reads half a file.
    const partial = `${cached}.${process.pid}.partial`;
    await writeFile(partial, bytes);
    await rename(partial, cached);
    return bytes;
  }
}

const BLOCK = 512;

function tarEntry(path: string, data: Buffer, mode: number): Buffer[] {
  const blocks: Buffer[] = [];
  let name = path;
  let prefix = "";
  if (Buffer.byteLength(path) > 100) {
    // ustar splits a long path at a slash into prefix (155) and name (100); past that a
    // pax header carries the whole path.
    const split = splitUstarPath(path);
    if (split === null) {
      const record = paxRecord("path", path);
      blocks.push(tarHeader("././@PaxHeader", "", record.length, 0o644, "x"), padded(record));
      name = path.slice(0, 99);
    } else {
      ({ prefix, name } = split);
    }
  }
  blocks.push(tarHeader(name, prefix, data.length, mode, "0"), padded(data));
  return blocks;
}

function splitUstarPath(path: string): { prefix: string; name: string } | null {
  for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100 && name !== "") return { prefix, name };
  }
  return null;
}

function paxRecord(key: string, value: string): Buffer {
  // A record is "<length> <key>=<value>\n" where the length counts its own digits.
  const body = ` ${key}=${value}\n`;
  const base = Buffer.byteLength(body);
  let length = base + String(base).length;
  if (String(length).length > String(base).length) length += 1;
  return Buffer.from(`${length}${body}`);
}

function padded(data: Buffer): Buffer {
  const rest = data.length % BLOCK;
  return rest === 0 ? data : Buffer.concat([data, Buffer.alloc(BLOCK - rest)]);
}

function tarHeader(name: string, prefix: string, size: number, mode: number, type: string): Buffer {
  const header = Buffer.alloc(BLOCK);
  const octal = (value: number, width: number) => `${value.toString(8).padStart(width - 1, "0")}\0`;
  header.write(name, 0, 100, "utf8");
  header.write(octal(mode, 8), 100, "ascii");
  header.write(octal(0, 8), 108, "ascii");
  header.write(octal(0, 8), 116, "ascii");
  header.write(octal(size, 12), 124, "ascii");
  header.write(octal(0, 12), 136, "ascii");
  header.write(type, 156, "ascii");
  header.write("ustar\0", 257, "ascii");
  header.write("00", 263, "ascii");
  header.write(prefix, 345, 155, "utf8");
  // The checksum is taken with its own field read as spaces.
  header.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, "ascii");
  return header;
}

// ---- serving ------------------------------------------------------------------------------

async function serve(
  served: readonly ServedCrate[],
  skipped: readonly SkippedDependency[],
  authorization: string | undefined,
  cleanUp: () => Promise<void>,
): Promise<SparseRegistry> {
  const byIndexName = new Map<string, ServedCrate[]>();
  for (const crate of served) {
    const key = crate.name.toLowerCase();
    byIndexName.set(key, [...(byIndexName.get(key) ?? []), crate]);
  }
  const crates = new Map<string, SparseRegistryCrate[]>();
  for (const crate of served) {
    const list = crates.get(crate.name) ?? [];
    list.push({ version: crate.version, checksum: crate.entry.cksum, bytes: crate.bytes.length });
    crates.set(crate.name, list);
  }
  const tampered = new Map<string, Buffer>();
  const yanked = new Set<string>();
  const requests: string[] = [];
  let downloaded = 0;
  let origin = "";

  const send = (res: ServerResponse, status: number, type: string, body: Buffer | string, head: boolean) => {
    res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
    res.end(head ? undefined : body);
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    try {
      answer(req, res);
    } catch (error) {
      // A malformed request (say, bad percent-encoding) must not take the test process down.
      if (!res.headersSent) send(res, 400, "text/plain", `bad request: ${String(error)}\n`, false);
      else res.destroy();
    }
  };

  const answer = (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? "/", origin).pathname;
    requests.push(path);
    const head = req.method === "HEAD";
    if (req.method !== "GET" && !head) return send(res, 405, "text/plain", "method not allowed\n", false);
    if (authorization !== undefined && req.headers.authorization !== authorization) {
      // cargo answers a 401 carrying this challenge by retrying with the registry's token.
      res.setHeader("www-authenticate", "Cargo");
      return send(res, 401, "text/plain", "authorization required\n", head);
    }
    if (path === "/index/config.json") {
      const config: Record<string, unknown> = { dl: `${origin}/api/v1/crates`, api: null };
      if (authorization !== undefined) config["auth-required"] = true;
      return send(res, 200, "application/json", JSON.stringify(config), head);
    }
    if (path.startsWith("/index/")) {
      const wanted = decodeURIComponent(path.slice("/index/".length));
      const name = wanted.slice(wanted.lastIndexOf("/") + 1);
      const versions = byIndexName.get(name);
      if (versions === undefined || wanted !== sparseIndexPath(name)) {
        return send(res, 404, "text/plain", "not found\n", head);
      }
      const lines = versions
        .map((crate) => {
          const entry = yanked.has(`${crate.name}@${crate.version}`) ? { ...crate.entry, yanked: true } : crate.entry;
          return `${JSON.stringify(entry)}\n`;
        })
        .join("");
      return send(res, 200, "text/plain", lines, head);
    }
    if (path.startsWith(DOWNLOAD_PREFIX)) {
      const [name, version, tail, ...extra] = path.slice(DOWNLOAD_PREFIX.length).split("/").map(decodeURIComponent);
      const crate = served.find((c) => c.name === name && c.version === version);
      if (crate === undefined || tail !== "download" || extra.length > 0) {
        return send(res, 404, "text/plain", "not found\n", head);
      }
      const bytes = tampered.get(`${crate.name}@${crate.version}`) ?? crate.bytes;
      // Counted when handed to the socket, so an assertion after the client read all of it holds.
      if (!head) downloaded += bytes.length;
      return send(res, 200, "application/gzip", bytes, head);
    }
    return send(res, 404, "text/plain", "not found\n", head);
  };

  const server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  origin = `http://127.0.0.1:${port}`;

  return {
    indexUrl: `sparse+${origin}/index/`,
    origin,
    crates,
    skipped,
    requests,
    downloadBytes: () => downloaded,
    tamper(name, version, bytes) {
      if (!served.some((c) => c.name === name && c.version === version)) {
        throw new Error(`sparse registry: ${name}@${version} is not served`);
      }
      tampered.set(`${name}@${version}`, Buffer.from(bytes));
    },
    yank(name, version) {
      if (!served.some((c) => c.name === name && c.version === version)) {
        throw new Error(`sparse registry: ${name}@${version} is not served`);
      }
      yanked.add(`${name}@${version}`);
    },
    async close() {
      // cargo and fetch keep connections alive; close them or close() waits for their timeout.
      const closed = new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));
      server.closeAllConnections();
      await closed;
      await cleanUp();
    },
  };
}
