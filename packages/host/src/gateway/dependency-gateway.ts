import { createHash } from "node:crypto";
import { appendFile, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Clock, RegistryCredentialGrant } from "@kiln/contract";
import { CRATES_IO_SOURCE, type GitReference, type LockedPackage, lockedPackages } from "./cargo-lock.js";
import { CrateCache } from "./crate-cache.js";
import { DEFAULT_RETRY, EgressHttp, type Presentation, type RetryPolicy } from "./egress-http.js";
import { EgressPolicy, type EgressRules, NO_EGRESS_ALLOWANCES, originOf, type Resolver } from "./egress-policy.js";
import { DEFAULT_FETCH_BOUNDS, type FetchBounds, FetchBudget } from "./fetch-bounds.js";
import { GatewayError } from "./gateway-error.js";
import { GitEgress } from "./git-egress.js";
import { type GitFetchContext, GitMirrors, type ProvidedRepository } from "./git-mirrors.js";
import { indexPathOf, isCrateName, isCrateVersion } from "./index-path.js";
import { type IndexLine, SparseRegistryClient } from "./sparse-registry-client.js";
import { directDependencies, directGitDependencies, workspaceRegistries } from "./workspace-registries.js";

/** The crate cache's default bound: LRU entries beyond it are removed. */
export const DEFAULT_CRATE_CACHE_BYTES = 10 * 2 ** 30;

/** crates.io's index URL as registry `deps[].registry` fields name it. */
const CRATES_IO_INDEX_NAMES = new Set(["https://github.com/rust-lang/crates.io-index", CRATES_IO_SOURCE]);

/** Most bytes of one Cargo.toml of the workspace the gateway reads. */
const MAX_MANIFEST_BYTES = 4 * 2 ** 20;

/** Most index files gathered to resolve one workspace without a Cargo.lock. */
const MAX_INDEX_FILES = 4000;
/** Parallel requests to one upstream. */
const CONCURRENCY = 8;

/** What an operator configures of the gateway's egress besides the crates.io index (all but the index default off). */
export type GatewayEgress = Omit<EgressRules, "trustedOrigins">;

export interface GatewayConfig {
  /** The content-addressed crate cache's directory. */
  readonly cacheRoot: string;
  /** The cache's bound (infinite in a worker process: the host agent evicts). */
  readonly cacheMaxBytes: number;
  /** `sparse+…/` standing for crates.io: the operator's upstream, trusted wherever it points. */
  readonly cratesIoIndex: string;
  readonly clock: Clock;
  readonly retry?: RetryPolicy;
  /** KILN_GATEWAY_ALLOW and the other allowances (egress-policy.ts); default none. */
  readonly egress?: GatewayEgress;
  /** Bounds on what one job fetches (fetch-bounds.ts); default DEFAULT_FETCH_BOUNDS. */
  readonly bounds?: Partial<FetchBounds>;
  /** PEM certificates trusted besides the system's (KILN_GATEWAY_CA_FILE: an internal registry's CA). */
  readonly extraCa?: string;
  /** The resolver the egress policy checks names with (tests give a fake DNS; default the system's). */
  readonly resolver?: Resolver;
  /** Hears each crate stored in the cache (a worker tells the host agent, which evicts). */
  readonly onCrateStored?: (bytes: number) => void;
}

export interface ProvideRequest {
  readonly tenant: string;
  /** The attempt's id (names the fetch worker's cgroup). */
  readonly attemptId: string;
  /** The materialized workspace (host path); read, never built from, on the host. */
  readonly workspaceDir: string;
  /** The source's Cargo.lock as text, or null: the gateway then has one generated. */
  readonly lockfile: string | null;
  /** The workspace's Cargo.toml files (paths in the workspace): the roots of resolution without a lockfile. */
  readonly manifestPaths: readonly string[];
  /** Host directory the job's local registries and configuration are assembled in. */
  readonly depsDir: string;
  /** Where depsDir appears inside the sandbox (read-only). */
  readonly sandboxDepsDir: string;
  /** The tenant's registry credentials, asked for only when a private registry is used. */
  readonly credentials: () => Promise<readonly RegistryCredentialGrant[]>;
  /**
   * Runs `cargo generate-lockfile` in the sandbox (no network) with the configuration at the
   * given in-sandbox path and the environment given, and returns the Cargo.lock it wrote.
   */
  readonly generateLockfile: (
    sandboxConfigPath: string,
    environment: Readonly<Record<string, string>>,
  ) => Promise<string>;
  readonly log: (line: string) => void;
  readonly signal: AbortSignal;
}

export interface LockedCrate {
  readonly name: string;
  readonly version: string;
  readonly source: string;
  readonly checksum: string | null;
}

export interface ProvidedDependencies {
  /** The generated Cargo configuration (the job record carries only its digest). */
  readonly configuration: string;
  readonly configurationSha256: string;
  readonly sandboxConfigPath: string;
  readonly lockedCrates: readonly LockedCrate[];
  readonly gitSources: readonly { url: string; rev: string }[];
  /** What cargo runs with besides the configuration (the git redirect's configuration file, when any). */
  readonly environment: Readonly<Record<string, string>>;
  /** The lockfile cargo generated against the gateway's index; null when the source had one. */
  readonly generatedLockfile: string | null;
  readonly cache: { hits: number; misses: number; bytesFetched: number; bytesFromCache: number };
}

/** One registry a job's dependencies come from, as the gateway reaches it. */
interface RegistryTarget {
  /** The `source` Cargo.lock writes for its packages. */
  readonly source: string;
  readonly indexUrl: string;
  /** Directory name of its local registry in the job's deps dir. */
  readonly slug: string;
  /** Cache scope: `public` for crates.io, the tenant's own otherwise. */
  readonly scope: string;
  readonly client: SparseRegistryClient;
}

const digest = (text: string) => createHash("sha256").update(text).digest("hex");

/**
 * The dependency gateway (DESIGN §6, the fetch-then-offline model of docs.rs' rustwide): on the
 * host, outside the sandbox, it provides exactly the packages a job's Cargo.lock locks — each
 * registry crate verified against the lock's checksum before anything uses it, from the
 * host's crate cache or its registry's upstream (presenting the tenant's credential where one
 * is held) — as local registries in a directory the sandbox sees read-only, with a generated
 * Cargo configuration replacing every registry source by them. The job still runs with no
 * network and never sees a credential. Without a Cargo.lock, it first gathers the index
 * entries the workspace can reach and has cargo generate the lock against them, in the
 * sandbox.
 */
export class DependencyGateway {
  readonly cache: CrateCache;
  readonly git: GitMirrors;
  readonly policy: EgressPolicy;
  readonly bounds: FetchBounds;

  constructor(readonly config: GatewayConfig) {
    this.cache = new CrateCache(config.cacheRoot, config.cacheMaxBytes);
    this.policy = new EgressPolicy(
      { ...(config.egress ?? NO_EGRESS_ALLOWANCES), trustedOrigins: [originOf(config.cratesIoIndex)] },
      ...(config.resolver === undefined ? [] : [config.resolver]),
    );
    this.bounds = { ...DEFAULT_FETCH_BOUNDS, ...config.bounds };
    this.git = new GitMirrors(join(config.cacheRoot, "git"), {
      clock: config.clock,
      retry: config.retry ?? DEFAULT_RETRY,
      policy: this.policy,
    });
  }

  async provide(request: ProvideRequest): Promise<ProvidedDependencies> {
    // Everything one job fetches (index files, crates, git objects) counts against one budget.
    const budget = new FetchBudget(this.bounds.jobBytes);
    const http = new EgressHttp({
      policy: this.policy,
      bounds: this.bounds,
      budget,
      clock: this.config.clock,
      retry: this.config.retry ?? DEFAULT_RETRY,
      signal: request.signal,
      ...(this.config.extraCa === undefined ? {} : { extraCa: this.config.extraCa }),
    });
    let gitEgress: Promise<GitEgress> | null = null;
    const gitContext = async (): Promise<GitFetchContext> => {
      gitEgress ??= GitEgress.start({
        policy: this.policy,
        budget,
        idleTimeoutMs: this.bounds.idleTimeoutMs,
        ...(this.config.extraCa === undefined ? {} : { extraCa: this.config.extraCa }),
      });
      return { egress: await gitEgress, signal: request.signal };
    };
    try {
      return await this.#provide(request, http, gitContext);
    } finally {
      http.close();
      if (gitEgress !== null) await (await (gitEgress as Promise<GitEgress>)).close();
    }
  }

  async #provide(
    request: ProvideRequest,
    http: EgressHttp,
    gitContext: () => Promise<GitFetchContext>,
  ): Promise<ProvidedDependencies> {
    const targets = await this.#targets(request, http);
    const manifests = await readManifests(request.workspaceDir, request.manifestPaths);
    await rm(request.depsDir, { recursive: true, force: true });
    await mkdir(request.depsDir, { recursive: true, mode: 0o755 });
    const sandboxConfigPath = `${request.sandboxDepsDir}/config.toml`;

    // Index files read while resolving are reused for the locked versions' index lines.
    const indexes = new Map<string, Promise<IndexLine[] | null>>();
    const indexOf = async (target: RegistryTarget, name: string) => {
      const key = `${target.source}\u0000${name.toLowerCase()}`;
      let found = indexes.get(key);
      if (found === undefined) {
        found = target.client.index(name);
        indexes.set(key, found);
      }
      return found;
    };

    let lockText = request.lockfile;
    let generated: string | null = null;
    if (lockText === null) {
      request.log("the source has no Cargo.lock: gathering the registry index it can reach to have cargo generate one");
      const wantedGit = directGitDependencies(manifests);
      // Every git URL is checked before any of them is fetched.
      for (const wanted of wantedGit) this.git.check(wanted.url);
      const repositories = await this.#provideGit(
        request,
        gitContext,
        wantedGit.map((d) => ({ url: d.url, revision: null, reference: d.reference })),
      );
      // A git dependency's own registry dependencies are roots of the resolution too.
      const gitManifests: string[] = [];
      for (const wanted of wantedGit) {
        const mirror = await this.git.mirror(request.tenant, wanted.url, null, await gitContext());
        gitManifests.push(...(await GitMirrors.manifests(mirror, wanted.url, wanted.reference, request.signal)));
      }
      const used = await this.#gatherIndex(request, targets, indexOf, [...manifests, ...gitManifests]);
      await this.#writeConfiguration(request, targets, used, repositories);
      lockText = await request.generateLockfile(sandboxConfigPath, gitEnvironment(request, repositories));
      generated = lockText;
      await rm(request.depsDir, { recursive: true, force: true });
      await mkdir(request.depsDir, { recursive: true, mode: 0o755 });
    }

    const locked = lockedPackages(lockText);
    const git = locked.filter((p): p is Extract<LockedPackage, { kind: "git" }> => p.kind === "git");
    for (const wanted of git) this.git.check(wanted.url);
    const repositories = await this.#provideGit(request, gitContext, git);
    const registryPackages = locked.filter(
      (p): p is Extract<LockedPackage, { kind: "registry" }> => p.kind === "registry",
    );
    const stats = { hits: 0, misses: 0, bytesFetched: 0, bytesFromCache: 0 };
    const lines = new Map<string, string[]>();
    const used = new Set<RegistryTarget>();
    await inParallel(registryPackages, CONCURRENCY, async (pkg) => {
      if (!isCrateName(pkg.name) || !isCrateVersion(pkg.version)) {
        throw new GatewayError(
          "invalid_lockfile",
          `Cargo.lock names an impossible package: ${pkg.name} ${pkg.version}`,
        );
      }
      const target = await this.#targetOfSource(targets, pkg.source, request);
      used.add(target);
      const what = `${pkg.name} ${pkg.version} from ${target.indexUrl}`;
      const entryOf = async () => {
        const versions = await indexOf(target, pkg.name);
        const line = versions?.find(
          (v) => v.entry.vers === pkg.version && v.entry.name.toLowerCase() === pkg.name.toLowerCase(),
        );
        if (line === undefined) {
          throw new GatewayError(
            "unknown_crate",
            `${target.indexUrl} has no ${pkg.name} ${pkg.version} (locked in Cargo.lock)`,
          );
        }
        return line;
      };
      let checksum = pkg.checksum;
      if (checksum === null) checksum = (await entryOf()).entry.cksum;
      const expected = checksum;
      const crate = await this.cache.obtain(target.scope, expected, what, async (file) => {
        // The lock names the checksum, so the download need not wait for the index line.
        const download = target.client.download(pkg.name, pkg.version, expected, file);
        download.catch(() => undefined); // awaited below, or abandoned when the index refuses first
        const line = await entryOf();
        if (line.entry.cksum !== expected) {
          throw new GatewayError(
            "checksum_mismatch",
            `${what}: the registry's index lists checksum ${line.entry.cksum}, but Cargo.lock's is ${expected}; nothing of it was used or cached`,
          );
        }
        return { ...(await download), indexLine: line.text };
      });
      if (crate.fetched) {
        this.config.onCrateStored?.(crate.bytes);
        stats.misses++;
        stats.bytesFetched += crate.bytes;
      } else {
        stats.hits++;
        stats.bytesFromCache += crate.bytes;
      }
      const dir = join(request.depsDir, target.slug);
      await mkdir(dir, { recursive: true, mode: 0o755 });
      await CrateCache.place(crate, join(dir, `${pkg.name}-${pkg.version}.crate`));
      const indexFile = join(dir, "index", indexPathOf(pkg.name));
      const group = lines.get(indexFile) ?? [];
      group.push(crate.indexLine.trim());
      lines.set(indexFile, group);
    });
    await Promise.all(
      [...lines].map(async ([file, group]) => {
        await mkdir(dirname(file), { recursive: true, mode: 0o755 });
        await writeFile(file, `${group.join("\n")}\n`, { mode: 0o644 });
      }),
    );
    const configuration = await this.#writeConfiguration(request, targets, used, repositories);
    return {
      configuration,
      configurationSha256: digest(configuration),
      sandboxConfigPath,
      lockedCrates: registryPackages.map((p) => ({
        name: p.name,
        version: p.version,
        source: p.source,
        checksum: p.checksum,
      })),
      gitSources: [...new Map(git.map((g) => [`${g.url}#${g.revision}`, { url: g.url, rev: g.revision }])).values()],
      environment: gitEnvironment(request, repositories),
      generatedLockfile: generated,
      cache: stats,
    };
  }

  /**
   * The registries the job may use: crates.io (at the configured index) and each registry the
   * workspace's own Cargo configuration names. A private registry's client presents the
   * tenant's credentials, each only to the origin it was registered for (over https; plain http
   * only to loopback where the operator allows it), whichever URL the request reached — the
   * index, the config.json's `dl`, or a redirect.
   */
  async #targets(request: ProvideRequest, http: EgressHttp): Promise<RegistryTarget[]> {
    const targets: RegistryTarget[] = [
      {
        source: CRATES_IO_SOURCE,
        indexUrl: this.config.cratesIoIndex,
        slug: "crates-io",
        scope: "public",
        client: new SparseRegistryClient(this.config.cratesIoIndex, { http, bounds: this.bounds }),
      },
    ];
    const named = await workspaceRegistries(request.workspaceDir);
    let grants: readonly RegistryCredentialGrant[] | null = null;
    for (const [name, index] of named) {
      if (!index.startsWith("sparse+")) {
        targets.push({
          source: index,
          indexUrl: index,
          slug: `unsupported-${name}`,
          scope: "none",
          client: null as never,
        });
        continue;
      }
      grants ??= await request.credentials();
      const slug = `r-${digest(index).slice(0, 16)}`;
      targets.push({
        source: index,
        indexUrl: index,
        slug,
        scope: `tenant-${digest(request.tenant).slice(0, 16)}/${slug}`,
        client: new SparseRegistryClient(index, { http, bounds: this.bounds, present: this.#presenter(grants) }),
      });
    }
    return targets;
  }

  /** What each request of a private registry presents: the credential registered for its origin, if any. */
  #presenter(grants: readonly RegistryCredentialGrant[]): (url: URL) => Presentation {
    return (url) => {
      const grant = grants.find((g) => this.policy.credentialOriginMatches(g.registry, url));
      if (grant !== undefined) return { authorization: grant.authorization };
      const registered = grants.find((g) => g.registry.toLowerCase() === url.host.toLowerCase());
      if (registered !== undefined && url.protocol !== "https:") {
        return {
          refused: `the tenant's registry credential for ${registered.registry} is presented over https only (not ${url.protocol.replace(/:$/, "")})`,
        };
      }
      return null;
    };
  }

  async #targetOfSource(
    targets: readonly RegistryTarget[],
    source: string,
    request: ProvideRequest,
  ): Promise<RegistryTarget> {
    const normalized = (s: string) => (s.endsWith("/") ? s : `${s}/`);
    const target =
      source === CRATES_IO_SOURCE
        ? targets[0]
        : targets.find(
            (t) =>
              normalized(t.source) === normalized(source) || normalized(`registry+${t.source}`) === normalized(source),
          );
    if (target === undefined) {
      request.log(
        `Cargo.lock names ${source}, which neither crates.io nor the workspace's .cargo/config.toml [registries] names`,
      );
      throw new GatewayError(
        "unsupported_source",
        `Cargo.lock locks packages from ${source}, a registry the workspace's .cargo/config.toml does not name under [registries]`,
      );
    }
    if (target.scope === "none") {
      throw new GatewayError(
        "unsupported_source",
        `${source} is a git-protocol registry index; the dependency gateway reaches registries by the sparse protocol only (sparse+…)`,
      );
    }
    return target;
  }

  /** The target a dependency's `registry` field (an index URL, or null for the same registry) names. */
  #dependencyTarget(targets: readonly RegistryTarget[], from: RegistryTarget, registry: string | null | undefined) {
    if (registry === null || registry === undefined) return from;
    if (CRATES_IO_INDEX_NAMES.has(registry)) return targets[0];
    return targets.find((t) => t.indexUrl === registry || t.indexUrl === `sparse+${registry}` || t.source === registry);
  }

  /**
   * Every index file reachable from the workspace's registry dependencies (all versions'
   * normal and build dependencies; a registry's dev-dependencies are never resolved), written
   * as the job's local registries so cargo can resolve a lockfile without a network.
   */
  async #gatherIndex(
    request: ProvideRequest,
    targets: readonly RegistryTarget[],
    indexOf: (target: RegistryTarget, name: string) => Promise<IndexLine[] | null>,
    manifests: readonly string[],
  ): Promise<Set<RegistryTarget>> {
    const byName = new Map<string, RegistryTarget>();
    for (const t of targets) byName.set(t.source, t);
    const named = await workspaceRegistries(request.workspaceDir);
    const seen = new Set<string>();
    const used = new Set<RegistryTarget>();
    let queue: { target: RegistryTarget; name: string }[] = [];
    const enqueue = (target: RegistryTarget | undefined, name: string) => {
      if (target === undefined || target.scope === "none" || !isCrateName(name)) return;
      const key = `${target.slug}\u0000${name.toLowerCase()}`;
      if (seen.has(key)) return;
      if (seen.size >= MAX_INDEX_FILES) {
        throw new GatewayError(
          "resolution_failed",
          `the workspace reaches more than ${MAX_INDEX_FILES} crates in the registry index`,
        );
      }
      seen.add(key);
      queue.push({ target, name });
    };
    for (const dep of directDependencies(manifests)) {
      const index = dep.registry === null ? undefined : named.get(dep.registry);
      enqueue(dep.registry === null ? targets[0] : targets.find((t) => t.indexUrl === index), dep.name);
    }
    while (queue.length > 0) {
      const batch = queue;
      queue = [];
      await inParallel(batch, CONCURRENCY, async ({ target, name }) => {
        const versions = await indexOf(target, name);
        if (versions === null) return;
        used.add(target);
        const file = join(request.depsDir, target.slug, "index", indexPathOf(name));
        await mkdir(dirname(file), { recursive: true, mode: 0o755 });
        await appendFile(file, `${versions.map((v) => v.text).join("\n")}\n`, { mode: 0o644 });
        for (const { entry } of versions) {
          for (const dep of entry.deps ?? []) {
            if (dep.kind === "dev") continue;
            enqueue(this.#dependencyTarget(targets, target, dep.registry), dep.package ?? dep.name);
          }
        }
      });
    }
    return used;
  }

  /**
   * The git repositories the job needs, mirrored on the host and copied into the deps dir
   * (holding the locked commits when `revision` is set, every ref of upstream otherwise).
   */
  async #provideGit(
    request: ProvideRequest,
    gitContext: () => Promise<GitFetchContext>,
    wanted: readonly { url: string; revision: string | null; reference: GitReference }[],
  ): Promise<ProvidedRepository[]> {
    const byUrl = new Map<string, { revision: string | null; reference: GitReference }[]>();
    for (const w of wanted) byUrl.set(w.url, [...(byUrl.get(w.url) ?? []), w]);
    const provided: ProvidedRepository[] = [];
    for (const [url, locks] of byUrl) {
      let mirror = "";
      for (const lock of locks) mirror = await this.git.mirror(request.tenant, url, lock.revision, await gitContext());
      const name = `${digest(url).slice(0, 24)}.git`;
      const hostPath = join(request.depsDir, "git", name);
      await mkdir(join(request.depsDir, "git"), { recursive: true, mode: 0o755 });
      const locked = locks.flatMap((l) =>
        l.revision === null ? [] : [{ revision: l.revision, reference: l.reference }],
      );
      await GitMirrors.provide(mirror, hostPath, locked, request.signal);
      provided.push({ url, hostPath, sandboxPath: `${request.sandboxDepsDir}/git/${name}` });
    }
    return provided;
  }

  /** The Cargo configuration replacing every registry source the job uses by its local registry. */
  async #writeConfiguration(
    request: ProvideRequest,
    targets: readonly RegistryTarget[],
    used: ReadonlySet<RegistryTarget>,
    repositories: readonly ProvidedRepository[],
  ): Promise<string> {
    const lines = [
      "# Generated by kiln's dependency gateway: every registry source is replaced by the packages",
      "# the gateway provided (checksums verified against Cargo.lock). The job has no network.",
      "[net]",
      // Git dependencies are fetched by cargo's git from the copies under git/ (file://, through
      // the redirect of gitconfig); otherwise cargo never needs to fetch anything.
      `offline = ${repositories.length === 0}`,
      ...(repositories.length === 0 ? [] : ["git-fetch-with-cli = true"]),
      "",
    ];
    if (repositories.length > 0) {
      const gitconfig = [
        "[safe]",
        "\tdirectory = *",
        '[protocol "file"]',
        "\tallow = always",
        ...repositories.flatMap((r) => [
          `[url ${JSON.stringify(`file://${r.sandboxPath}`)}]`,
          `\tinsteadOf = ${JSON.stringify(r.url)}`,
        ]),
      ];
      await writeFile(join(request.depsDir, "gitconfig"), `${gitconfig.join("\n")}\n`, { mode: 0o644 });
    }
    for (const target of targets) {
      if (target.scope === "none") continue;
      const local = `${request.sandboxDepsDir}/${target.slug}`;
      await mkdir(join(request.depsDir, target.slug, "index"), { recursive: true, mode: 0o755 });
      if (target.slug === "crates-io") {
        lines.push("[source.crates-io]", `replace-with = "kiln-crates-io"`, "");
      } else {
        if (!used.has(target)) continue;
        lines.push(
          `[source.kiln-upstream-${target.slug}]`,
          `registry = ${JSON.stringify(target.source)}`,
          `replace-with = "kiln-${target.slug}"`,
          "",
        );
      }
      lines.push(`[source.kiln-${target.slug}]`, `local-registry = ${JSON.stringify(local)}`, "");
    }
    const text = `${lines.join("\n")}`;
    await writeFile(join(request.depsDir, "config.toml"), text, { mode: 0o644 });
    return text;
  }
}

/** The environment cargo needs for the job's git copies: git's configuration with the redirects. */
function gitEnvironment(request: ProvideRequest, repositories: readonly ProvidedRepository[]): Record<string, string> {
  return repositories.length === 0 ? {} : { GIT_CONFIG_GLOBAL: `${request.sandboxDepsDir}/gitconfig` };
}

/** Runs `work` over `items`, at most `limit` at a time; the first failure rejects (the rest settle). */
async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown = null;
  const worker = async () => {
    while (failure === null && next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== null) throw failure;
}

/** The workspace's Cargo.toml files as text, each bounded (a real one is a few KiB). */
async function readManifests(workspaceDir: string, paths: readonly string[]): Promise<string[]> {
  const texts: string[] = [];
  for (const path of paths) {
    const file = join(workspaceDir, path);
    const info = await stat(file);
    if (info.size > MAX_MANIFEST_BYTES) {
      throw new GatewayError(
        "too_large",
        `${path} is larger than ${MAX_MANIFEST_BYTES / 2 ** 20} MiB, the bound on a Cargo.toml the dependency gateway reads`,
      );
    }
    texts.push(await readFile(file, "utf8"));
  }
  return texts;
}
