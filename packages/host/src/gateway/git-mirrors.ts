import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "@kiln/contract";
import type { GitReference } from "./cargo-lock.js";
import { GatewayError } from "./gateway-error.js";
import type { RetryPolicy } from "./sparse-registry-client.js";

/** A git repository a job depends on, as the gateway provides it to the sandbox. */
export interface ProvidedRepository {
  readonly url: string;
  /** The bare repository in the job's deps dir (host path) and where the sandbox sees it. */
  readonly hostPath: string;
  readonly sandboxPath: string;
}

/** The environment every git of the gateway runs with: no user or system configuration, no prompts. */
const GIT_ENV: NodeJS.ProcessEnv = {
  PATH: "/usr/bin:/bin",
  GIT_TERMINAL_PROMPT: "0",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  HOME: "/nonexistent",
};

function git(args: readonly string[], signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("git", args, { env: GIT_ENV, signal, maxBuffer: 16 * 2 ** 20 }, (error, stdout, stderr) => {
      if (error === null) resolve(stdout);
      else reject(new Error(`git ${args[0] === "-C" ? args[2] : args[0]}: ${stderr.trim() || error.message}`));
    });
  });
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
 * Git credentials are not supported: a repository that needs one is refused by its upstream.
 */
export class GitMirrors {
  readonly #inFlight = new Map<string, Promise<string>>();

  constructor(
    readonly root: string,
    private readonly options: { readonly clock: Clock; readonly retry: RetryPolicy },
  ) {}

  /** The mirror of `url` for `tenant`, holding `revision` when given (fetched once however many jobs ask). */
  async mirror(tenant: string, url: string, revision: string | null, signal: AbortSignal): Promise<string> {
    const digest = createHash("sha256").update(`${tenant}\u0000${url}`).digest("hex");
    const path = join(this.root, digest.slice(0, 2), `${digest}.git`);
    const key = `${path}\u0000${revision ?? ""}`;
    let pending = this.#inFlight.get(key);
    if (pending === undefined) {
      pending = this.#update(path, url, revision, signal).finally(() => this.#inFlight.delete(key));
      this.#inFlight.set(key, pending);
    }
    return pending;
  }

  async #update(path: string, url: string, revision: string | null, signal: AbortSignal): Promise<string> {
    if (revision !== null && (await exists(path)) && (await this.#holds(path, revision, signal))) return path;
    if (!(await exists(path))) {
      // Root's alone, as the crate cache: a tenant's mirror is copied into its attempts, never read here by another user.
      await mkdir(path, { recursive: true, mode: 0o700 });
      await git(["init", "--quiet", "--bare", path], signal);
    }
    await this.#withRetries(url, () =>
      git(
        [
          "-C",
          path,
          "fetch",
          "--quiet",
          "--prune",
          "--force",
          "--",
          url,
          "+refs/heads/*:refs/heads/*",
          "+refs/tags/*:refs/tags/*",
        ],
        signal,
      ),
    );
    // The upstream's default branch, so a dependency naming no branch resolves as it would upstream.
    const head = /^ref: (refs\/heads\/\S+)\tHEAD$/m.exec(
      await git(["ls-remote", "--symref", "--", url, "HEAD"], signal).catch(() => ""),
    )?.[1];
    if (head !== undefined) await git(["-C", path, "symbolic-ref", "HEAD", head], signal);
    if (revision !== null && !(await this.#holds(path, revision, signal))) {
      await git(["-C", path, "fetch", "--quiet", "--", url, revision], signal).catch(() => undefined);
      if (!(await this.#holds(path, revision, signal))) {
        throw new GatewayError("unknown_crate", `${url} has no commit ${revision} (locked in Cargo.lock)`);
      }
    }
    return path;
  }

  async #holds(path: string, revision: string, signal: AbortSignal): Promise<boolean> {
    return git(["-C", path, "cat-file", "-e", `${revision}^{commit}`], signal).then(
      () => true,
      () => false,
    );
  }

  async #withRetries(url: string, work: () => Promise<unknown>): Promise<void> {
    let last = "";
    for (let attempt = 1; attempt <= this.options.retry.attempts; attempt++) {
      try {
        await work();
        return;
      } catch (error) {
        last = (error as Error).message;
        if (attempt < this.options.retry.attempts) {
          await this.options.clock.sleep(this.options.retry.firstDelayMs * 2 ** (attempt - 1));
        }
      }
    }
    throw new GatewayError(
      "upstream_unreachable",
      `${url} could not be fetched after ${this.options.retry.attempts} tries: ${last}`,
    );
  }

  /**
   * The Cargo.toml files of the commit `reference` names in a mirror: the roots a lockfile's
   * resolution also starts from (a git dependency's own registry dependencies).
   */
  static async manifests(mirror: string, reference: GitReference, signal: AbortSignal): Promise<string[]> {
    const commit =
      reference.kind === "branch"
        ? `refs/heads/${reference.value}`
        : reference.kind === "tag"
          ? `refs/tags/${reference.value}`
          : reference.kind === "rev"
            ? reference.value
            : "HEAD";
    const listing = await git(["-C", mirror, "ls-tree", "-r", "--name-only", "--end-of-options", commit], signal).catch(
      () => {
        throw new GatewayError(
          "unknown_crate",
          `the git repository has no ${reference.kind} ${"value" in reference ? reference.value : ""}`,
        );
      },
    );
    const paths = listing
      .split("\n")
      .filter((p) => /(^|\/)Cargo\.toml$/.test(p))
      .slice(0, 1000);
    return Promise.all(paths.map((p) => git(["-C", mirror, "show", `${commit}:${p}`], signal)));
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
