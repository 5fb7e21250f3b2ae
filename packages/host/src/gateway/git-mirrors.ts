import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "@kiln/contract";
import type { GitReference } from "./cargo-lock.js";
import type { RetryPolicy } from "./egress-http.js";
import { type EgressPolicy, urlForMessage } from "./egress-policy.js";
import { GatewayError } from "./gateway-error.js";
import type { GitEgress } from "./git-egress.js";

/** A git repository a job depends on, as the gateway provides it to the sandbox. */
export interface ProvidedRepository {
  readonly url: string;
  /** The bare repository in the job's deps dir (host path) and where the sandbox sees it. */
  readonly hostPath: string;
  readonly sandboxPath: string;
}

/** What one job's git commands that reach an upstream go through. */
export interface GitFetchContext {
  readonly egress: GitEgress;
  readonly signal: AbortSignal;
}

/** The environment every git of the gateway runs with: no user or system configuration, no prompts. */
const GIT_ENV: Readonly<Record<string, string>> = {
  PATH: "/usr/bin:/bin",
  GIT_TERMINAL_PROMPT: "0",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  HOME: "/nonexistent",
};

/**
 * Commands on kiln's own repositories only (the mirror, a job's copy): local paths are the only
 * transport they need. Commands naming a tenant's URL run with GitEgress's environment instead
 * (https only).
 */
const LOCAL_GIT_ENV = { ...GIT_ENV, GIT_ALLOW_PROTOCOL: "file" };

/** Most bytes of one Cargo.toml read from a git dependency (a real one is a few KiB). */
const MAX_GIT_MANIFEST_BYTES = 4 * 2 ** 20;

class GitFailed extends Error {
  constructor(
    readonly stderr: string,
    readonly exitCode: number | string | null,
  ) {
    super("git failed");
  }
}

function run(
  command: string,
  args: readonly string[],
  options: { signal: AbortSignal; env: Readonly<Record<string, string>>; maxBuffer?: number },
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { env: options.env, signal: options.signal, maxBuffer: options.maxBuffer ?? 16 * 2 ** 20, killSignal: "SIGKILL" },
      (error, stdout, stderr) => {
        if (error === null) resolve(stdout);
        else if (options.signal.aborted) reject(options.signal.reason ?? error);
        else reject(new GitFailed(String(stderr).slice(-8192), (error as { code?: number | string }).code ?? null));
      },
    );
  });
}

/** A local git command (kiln's own repositories). */
function git(args: readonly string[], signal: AbortSignal, maxBuffer?: number): Promise<string> {
  return run("git", args, { signal, env: LOCAL_GIT_ENV, ...(maxBuffer === undefined ? {} : { maxBuffer }) });
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

/**
 * The host's mirrors of the git repositories jobs depend on: a bare repository per tenant and
 * URL under `<root>`, fetched from upstream (every branch and tag, then the locked commit by
 * its id if no ref reaches it) on the host, never in the sandbox. A job gets a copy holding the
 * locked commit (objects hard-linked from the mirror) and the ref its manifest names pointing
 * at it, which cargo in the sandbox fetches over `file://` through an `insteadOf` redirect.
 *
 * Only a URL the egress policy admits for git is mirrored (https, or ssh where the operator
 * allows it), and every connection git makes goes through GitEgress: a local path, `file://`,
 * `fd::` or `ext::` is never handed to git, which refuses them itself too. Git credentials are
 * not supported: a repository that needs one is refused by its upstream.
 *
 * The gateway runs one worker process per attempt, so several processes may update one mirror:
 * every command that changes a mirror holds its lock (`flock(1)` on `<mirror>.lock`, released by
 * the kernel when the holder dies, so a worker killed at its ceiling leaves no stale lock).
 * Within a process, concurrent asks for the same mirror and revision share one update.
 */
export class GitMirrors {
  readonly #inFlight = new Map<string, Promise<string>>();

  constructor(
    readonly root: string,
    private readonly options: { readonly clock: Clock; readonly retry: RetryPolicy; readonly policy: EgressPolicy },
  ) {}

  /** Refuses a git URL the egress policy does not admit (before anything runs). */
  check(url: string): void {
    this.options.policy.checkUrl(url, "git", "the git dependency");
  }

  /** The mirror of `url` for `tenant`, holding `revision` when given (fetched once however many jobs ask). */
  async mirror(tenant: string, url: string, revision: string | null, context: GitFetchContext): Promise<string> {
    this.check(url);
    const digest = createHash("sha256").update(`${tenant}\u0000${url}`).digest("hex");
    const path = join(this.root, digest.slice(0, 2), `${digest}.git`);
    const key = `${path}\u0000${revision ?? ""}`;
    let pending = this.#inFlight.get(key);
    if (pending === undefined) {
      pending = this.#update(path, url, revision, context).finally(() => this.#inFlight.delete(key));
      this.#inFlight.set(key, pending);
    }
    return pending;
  }

  /** A git command that reaches `url` (through the job's GitEgress), holding the mirror's lock. */
  #remote(path: string, url: string, args: readonly string[], context: GitFetchContext): Promise<string> {
    return run("flock", [`${path}.lock`, "git", ...context.egress.configArgs(), "-C", path, ...args], {
      signal: context.signal,
      env: { ...GIT_ENV, ...context.egress.environment() },
    }).catch((error: unknown) => {
      throw error instanceof GitFailed ? gitFailure(url, error, context.egress) : error;
    });
  }

  async #update(path: string, url: string, revision: string | null, context: GitFetchContext): Promise<string> {
    const { signal } = context;
    if (revision !== null && (await exists(path)) && (await this.#holds(path, revision, signal))) return path;
    // A name resolving where the policy refuses is refused before a mirror is made for it. This
    // is not what enforces the rule (the proxy checks every connection git makes, where a second
    // answer of the name would go): it keeps a refused URL from leaving an empty mirror behind.
    await this.options.policy.addressesFor(new URL(url), "the git dependency");
    if (!(await exists(path))) {
      // Root's alone, as the crate cache: a tenant's mirror is copied into its attempts, never read here by another user.
      await mkdir(path, { recursive: true, mode: 0o700 });
      await run("flock", [`${path}.lock`, "git", "init", "--quiet", "--bare", path], { signal, env: LOCAL_GIT_ENV });
    }
    await this.#withRetries(url, signal, () =>
      this.#remote(
        path,
        url,
        ["fetch", "--quiet", "--prune", "--force", "--", url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        context,
      ),
    );
    // The upstream's default branch, so a dependency naming no branch resolves as it would upstream.
    const head = /^ref: (refs\/heads\/\S+)\tHEAD$/m.exec(
      await this.#remote(path, url, ["ls-remote", "--symref", "--", url, "HEAD"], context).catch((error: unknown) => {
        if (signal.aborted) throw error;
        return "";
      }),
    )?.[1];
    if (head !== undefined) {
      await run("flock", [`${path}.lock`, "git", "-C", path, "symbolic-ref", "HEAD", head], {
        signal,
        env: LOCAL_GIT_ENV,
      });
    }
    if (revision !== null && !(await this.#holds(path, revision, signal))) {
      await this.#remote(path, url, ["fetch", "--quiet", "--", url, revision], context).catch((error: unknown) => {
        // Refused or over budget is the job's answer; an upstream that cannot serve the commit by id is not.
        if (signal.aborted || (error instanceof GatewayError && ["egress_refused", "too_large"].includes(error.kind))) {
          throw error;
        }
      });
      if (!(await this.#holds(path, revision, signal))) {
        throw new GatewayError(
          "unknown_crate",
          `${urlForMessage(url)} has no commit ${revision} (locked in Cargo.lock)`,
        );
      }
    }
    return path;
  }

  async #holds(path: string, revision: string, signal: AbortSignal): Promise<boolean> {
    return git(["-C", path, "cat-file", "-e", `${revision}^{commit}`], signal).then(
      () => true,
      (error: unknown) => {
        if (signal.aborted) throw error;
        return false;
      },
    );
  }

  /** Retries a transient failure with backoff; a refusal, a missing repository or a cancellation ends it at once. */
  async #withRetries(url: string, signal: AbortSignal, work: () => Promise<unknown>): Promise<void> {
    let last = "";
    for (let attempt = 1; attempt <= this.options.retry.attempts; attempt++) {
      try {
        await work();
        return;
      } catch (error) {
        if (signal.aborted || !(error instanceof TransientGitFailure)) throw error;
        last = error.message;
        if (attempt < this.options.retry.attempts) {
          await this.options.clock.sleep(this.options.retry.firstDelayMs * 2 ** (attempt - 1), signal);
        }
      }
    }
    throw new GatewayError(
      last.includes("timed out") ? "timed_out" : "upstream_unreachable",
      `${urlForMessage(url)} could not be fetched after ${this.options.retry.attempts} ${this.options.retry.attempts === 1 ? "try" : "tries"}: ${last}`,
    );
  }

  /**
   * The Cargo.toml files of the commit `reference` names in a mirror: the roots a lockfile's
   * resolution also starts from (a git dependency's own registry dependencies).
   */
  static async manifests(mirror: string, url: string, reference: GitReference, signal: AbortSignal): Promise<string[]> {
    const commit =
      reference.kind === "branch"
        ? `refs/heads/${reference.value}`
        : reference.kind === "tag"
          ? `refs/tags/${reference.value}`
          : reference.kind === "rev"
            ? reference.value
            : "HEAD";
    const listing = await git(
      ["-C", mirror, "ls-tree", "-r", "-z", "--long", "--end-of-options", commit],
      signal,
    ).catch((error: unknown) => {
      if (signal.aborted) throw error;
      throw new GatewayError(
        "unknown_crate",
        `${urlForMessage(url)} has no ${reference.kind} ${"value" in reference ? reference.value : ""}`,
      );
    });
    const manifests: { path: string; size: number }[] = [];
    for (const record of listing.split("\0")) {
      // <mode> SP <type> SP <object> SP+ <size> TAB <path>
      const match = /^\d+ blob [0-9a-f]+ +(\d+)\t(.*)$/s.exec(record);
      if (match === null || !/(^|\/)Cargo\.toml$/.test(match[2] ?? "")) continue;
      manifests.push({ path: match[2] ?? "", size: Number(match[1]) });
      if (manifests.length >= 1000) break;
    }
    const large = manifests.find((m) => m.size > MAX_GIT_MANIFEST_BYTES);
    if (large !== undefined) {
      throw new GatewayError(
        "too_large",
        `${urlForMessage(url)}: ${large.path} is larger than ${MAX_GIT_MANIFEST_BYTES / 2 ** 20} MiB, the bound on a Cargo.toml the gateway reads`,
      );
    }
    const texts: string[] = [];
    for (const { path } of manifests) texts.push(await git(["-C", mirror, "show", `${commit}:${path}`], signal));
    return texts;
  }

  /**
   * A copy of the mirror for one job at `hostPath`: objects hard-linked, every ref, plus the
   * locked commit under the ref the manifest names (and `HEAD` on it), so cargo's fetch of
   * the locked revision finds it however it asks.
   */
  static async provide(
    mirror: string,
    hostPath: string,
    locked: readonly { revision: string; reference: GitReference }[],
    signal: AbortSignal,
  ): Promise<void> {
    await rm(hostPath, { recursive: true, force: true });
    await git(["clone", "--quiet", "--bare", "--local", "--", mirror, hostPath], signal);
    for (const { revision, reference } of locked) {
      const ref =
        reference.kind === "branch"
          ? `refs/heads/${reference.value}`
          : reference.kind === "tag"
            ? `refs/tags/${reference.value}`
            : `refs/kiln/locked/${revision}`;
      await git(["check-ref-format", ref], signal).catch(() => {
        throw new GatewayError("invalid_lockfile", `Cargo.lock names a git reference that is not a valid ref: ${ref}`);
      });
      await git(["-C", hostPath, "update-ref", ref, revision], signal);
    }
    await git(["-C", hostPath, "config", "uploadpack.allowAnySHA1InWant", "true"], signal);
  }
}

/** A failure worth another try (the upstream may answer next time). */
class TransientGitFailure extends Error {}

/**
 * Why git could not reach `url`, in kiln's words: the egress policy's refusal or the byte
 * budget when the proxy made them, else git's failure classified — never git's output itself,
 * which carries what the upstream sent (`remote:` lines, redirect targets, error pages).
 */
function gitFailure(url: string, failure: GitFailed, egress: GitEgress): Error {
  const budget = egress.budgetError;
  if (budget !== null) return budget;
  const named = urlForMessage(url);
  const refused = egress.lastRefusal;
  if (refused !== null) return new GatewayError(refused.kind, `the git dependency ${named}: ${refused.message}`);
  const text = failure.stderr;
  const status = /returned error: (\d{3})/.exec(text)?.[1];
  if (/repository '.*' not found|Repository not found/i.test(text) || status === "404") {
    return new GatewayError("unknown_crate", `${named}: the server has no such repository`);
  }
  if (status === "401" || status === "403" || /Authentication failed|could not read Username/i.test(text)) {
    return new GatewayError(
      "upstream_refused",
      `${named} asks for credentials${status === undefined ? "" : ` (HTTP ${status})`}; kiln presents none to git upstreams`,
    );
  }
  if (/SSL certificate problem|certificate verif|server certificate/i.test(text)) {
    return new GatewayError("upstream_refused", `${named}: its TLS certificate is not trusted`);
  }
  if (/Host key verification failed/i.test(text)) {
    return new GatewayError("upstream_refused", `${named}: its ssh host key is not one this host knows`);
  }
  if (/not allowed|transport .* not/i.test(text)) {
    return new GatewayError("egress_refused", `the git dependency ${named} is refused: git over https only`);
  }
  if (status !== undefined && status !== "429" && !status.startsWith("5")) {
    return new GatewayError("upstream_refused", `${named} answered HTTP ${status}`);
  }
  if (/Operation too slow|timed out/i.test(text)) return new TransientGitFailure("timed out");
  return new TransientGitFailure(
    status === undefined ? `git could not fetch it (exit ${failure.exitCode ?? "unknown"})` : `answered HTTP ${status}`,
  );
}
