import { readFileSync } from "node:fs";
import type { Logger } from "@kiln/contract";
import { App } from "@octokit/app";
import { Octokit } from "@octokit/core";

/**
 * The source-hosting provider: a GitHub App, through Octokit (`@octokit/app`: the app's RS256
 * JWT, installation tokens minted from it and cached by `@octokit/auth-app` until shortly before
 * their hour is up). The API base URL is configurable, so GitHub Enterprise Server works and
 * tests point it at a simulator; nothing here speaks HTTP itself.
 *
 * Secrets — the private key, the webhook secret, installation tokens — stay inside Octokit and
 * this object: never logged, never in an error message, never stored by kiln.
 */
export interface GitHubAppConfig {
  readonly appId: string;
  /** PEM text of the app's private key. */
  readonly privateKey: string;
  readonly webhookSecret: string;
  /** The app's URL name, for its installation page. */
  readonly slug: string;
  /** REST API base: `https://api.github.com`, or `https://<ghes>/api/v3`. */
  readonly apiBaseUrl: string;
  /**
   * The provider's web UI origin (installation page, OAuth web flow): KILN_GITHUB_WEB_URL,
   * else derived from the API base (https://github.com for api.github.com).
   */
  readonly webBaseUrl?: string;
  /**
   * The app's OAuth client (KILN_GITHUB_CLIENT_ID / _SECRET): with it a claim is
   * provider-authorized — the person authorizes with the provider and kiln checks the
   * installation is among theirs (`/onboarding/github/setup`). Without it, claims need
   * allowUnverifiedClaims.
   */
  readonly oauthClient?: { readonly clientId: string; readonly clientSecret: string } | null;
  /**
   * KILN_GITHUB_ALLOW_UNVERIFIED_CLAIMS=1: a tenant admin may claim an installation by its id
   * alone. The spec's claim is provider-authorized (the person's own authorization with GitHub
   * proves the installation is theirs), which this build cannot check yet; without this
   * switch every claim is refused, so no tenant can take another's installation. Only for
   * installs whose tenant admins all trust one another (one organization).
   */
  readonly allowUnverifiedClaims: boolean;
}

export const DEFAULT_GITHUB_API_URL = "https://api.github.com";

/**
 * The app's configuration from the environment, or null when none is configured (then kiln runs
 * without a source-hosting app: onboarding's app fields are null and repositories are onboarded
 * with `kiln-server admin repo onboard`). A partial configuration is an error naming what is
 * missing, never a silently disabled app.
 */
export function gitHubAppConfigFromEnv(env: NodeJS.ProcessEnv = process.env): GitHubAppConfig | null {
  const appId = env.KILN_GITHUB_APP_ID?.trim() || undefined;
  const keyText = env.KILN_GITHUB_APP_PRIVATE_KEY?.trim() || undefined;
  const keyFile = env.KILN_GITHUB_APP_PRIVATE_KEY_FILE?.trim() || undefined;
  const webhookSecret = env.KILN_GITHUB_WEBHOOK_SECRET || undefined;
  const slug = env.KILN_GITHUB_APP_SLUG?.trim() || undefined;
  const clientId = env.KILN_GITHUB_CLIENT_ID?.trim() || undefined;
  const clientSecret = env.KILN_GITHUB_CLIENT_SECRET || undefined;
  const apiBaseUrl = (env.KILN_GITHUB_API_URL?.trim() || DEFAULT_GITHUB_API_URL).replace(/\/+$/, "");
  const given = { appId, keyText, keyFile, webhookSecret, slug };
  if (Object.values(given).every((v) => v === undefined)) return null;
  const missing = [
    appId === undefined ? "KILN_GITHUB_APP_ID" : null,
    keyText === undefined && keyFile === undefined ? "KILN_GITHUB_APP_PRIVATE_KEY (or _FILE)" : null,
    webhookSecret === undefined ? "KILN_GITHUB_WEBHOOK_SECRET" : null,
    slug === undefined ? "KILN_GITHUB_APP_SLUG" : null,
    clientId !== undefined && clientSecret === undefined ? "KILN_GITHUB_CLIENT_SECRET" : null,
    clientId === undefined && clientSecret !== undefined ? "KILN_GITHUB_CLIENT_ID" : null,
  ].filter((m) => m !== null);
  if (missing.length > 0) {
    throw new Error(`the GitHub App is partly configured: set ${missing.join(", ")} too, or none of them`);
  }
  if (!/^[0-9]+$/.test(appId ?? "")) throw new Error("KILN_GITHUB_APP_ID must be the app's numeric id");
  const url = new URL(apiBaseUrl);
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error("KILN_GITHUB_API_URL must be http(s)://");
  const webBaseUrl = (env.KILN_GITHUB_WEB_URL?.trim() || webBaseOf(apiBaseUrl)).replace(/\/+$/, "");
  const web = new URL(webBaseUrl);
  if (web.protocol !== "https:" && web.protocol !== "http:") throw new Error("KILN_GITHUB_WEB_URL must be http(s)://");
  const privateKey = keyText ?? readFileSync(keyFile ?? "", "utf8");
  if (!privateKey.includes("PRIVATE KEY")) {
    throw new Error("the GitHub App private key is not a PEM private key (its text is not shown)");
  }
  return {
    appId: appId ?? "",
    privateKey,
    webhookSecret: webhookSecret ?? "",
    slug: slug ?? "",
    apiBaseUrl,
    webBaseUrl,
    oauthClient: clientId === undefined ? null : { clientId, clientSecret: clientSecret ?? "" },
    allowUnverifiedClaims: env.KILN_GITHUB_ALLOW_UNVERIFIED_CLAIMS?.trim() === "1",
  };
}

/** A failed provider request: its HTTP status (null when none arrived) and when to try again. */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    /** Seconds the provider asked us to wait (Retry-After, or until x-ratelimit-reset). */
    readonly retryAfterSeconds: number | null,
  ) {
    super(message);
    this.name = "ProviderError";
  }

  /** Worth trying again: no answer, a server error, or a rate limit. */
  get transient(): boolean {
    return this.status === null || this.status >= 500 || this.status === 429 || this.retryAfterSeconds !== null;
  }
}

export interface InstallationInfo {
  readonly id: number;
  readonly account: string;
  readonly suspended: boolean;
}

/** A CI workflow run as the provider reports it. */
export interface WorkflowRunInfo {
  readonly id: number;
  readonly repository: string;
  readonly name: string | null;
  readonly headSha: string;
  readonly status: string | null;
  readonly conclusion: string | null;
  readonly htmlUrl: string;
  readonly updatedAt: string;
}

export type CheckRunStatus = "queued" | "in_progress" | "completed";
export type CheckRunConclusion = "success" | "failure" | "cancelled" | "timed_out" | "neutral" | "action_required";

export interface CheckRunAnnotation {
  readonly path: string;
  readonly start_line: number;
  readonly end_line: number;
  readonly annotation_level: "notice" | "warning" | "failure";
  readonly message: string;
  readonly title?: string;
}

export interface CheckRunWrite {
  readonly status: CheckRunStatus;
  readonly conclusion?: CheckRunConclusion;
  readonly started_at?: string;
  readonly completed_at?: string;
  readonly output?: {
    readonly title: string;
    readonly summary: string;
    readonly annotations?: CheckRunAnnotation[];
  };
}

/** The check run kiln reports: DESIGN.md §1 names it after the service. */
export const CHECK_RUN_NAME = "kiln";

/** The provider allows at most this many annotations per check run request. */
export const ANNOTATIONS_PER_REQUEST = 50;

export class GitHubApp {
  readonly #app: App;
  readonly #config: GitHubAppConfig;
  /** See GitHubAppConfig.allowUnverifiedClaims. */
  readonly allowUnverifiedClaims: boolean;

  constructor(config: GitHubAppConfig, log: Logger) {
    this.#config = config;
    this.allowUnverifiedClaims = config.allowUnverifiedClaims;
    const quiet = (level: "info" | "warn" | "error") => (message: string) =>
      log[level]({ provider: "github" }, message);
    this.#app = new App({
      appId: config.appId,
      privateKey: config.privateKey,
      webhooks: { secret: config.webhookSecret },
      Octokit: Octokit.defaults({ baseUrl: config.apiBaseUrl }),
      log: { debug: () => {}, info: quiet("info"), warn: quiet("warn"), error: quiet("error") },
    });
  }

  /** The app's installation page on the provider's web UI. */
  get installUrl(): string {
    return `${this.webBase}/apps/${encodeURIComponent(this.#config.slug)}/installations/new`;
  }

  /** The installation as the app sees it (app JWT); a ProviderError (404) when the app has none of that id. */
  async installation(installationId: number): Promise<InstallationInfo> {
    const { data } = await this.#call(() =>
      this.#app.octokit.request("GET /app/installations/{installation_id}", { installation_id: installationId }),
    );
    const account = data.account !== null && "login" in data.account ? data.account.login : String(data.id);
    return { id: data.id, account, suspended: data.suspended_at !== null && data.suspended_at !== undefined };
  }

  /** Every repository (`owner/name`) the installation covers, through its installation token. */
  async installationRepositories(installationId: number): Promise<string[]> {
    const octokit = await this.#installationClient(installationId);
    const names: string[] = [];
    for (let page = 1; ; page += 1) {
      const { data } = await this.#call(() =>
        octokit.request("GET /installation/repositories", { per_page: 100, page }),
      );
      names.push(...data.repositories.map((r) => r.full_name));
      if (data.repositories.length < 100 || names.length >= data.total_count) return names;
    }
  }

  /**
   * The merge base of `baseRef` against the repository's default branch: the repository's
   * default branch, then the compare API's `merge_base_commit`.
   */
  async mergeBase(installationId: number, repository: string, baseRef: string): Promise<string> {
    const octokit = await this.#installationClient(installationId);
    const { owner, repo } = splitRepository(repository);
    const { data: repoData } = await this.#call(() => octokit.request("GET /repos/{owner}/{repo}", { owner, repo }));
    const { data } = await this.#call(() =>
      octokit.request("GET /repos/{owner}/{repo}/compare/{basehead}", {
        owner,
        repo,
        basehead: `${repoData.default_branch}...${baseRef}`,
        per_page: 1,
      }),
    );
    return data.merge_base_commit.sha;
  }

  /** kiln's check run for the job on the commit, when one was created (found by its external id). */
  async findCheckRun(
    installationId: number,
    repository: string,
    headSha: string,
    jobId: string,
  ): Promise<number | null> {
    const octokit = await this.#installationClient(installationId);
    const { owner, repo } = splitRepository(repository);
    const { data } = await this.#call(() =>
      octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", {
        owner,
        repo,
        ref: headSha,
        check_name: CHECK_RUN_NAME,
        filter: "all",
        per_page: 100,
      }),
    );
    const found = data.check_runs.find((run) => run.external_id === jobId);
    return found === undefined ? null : Number(found.id);
  }

  async createCheckRun(
    installationId: number,
    repository: string,
    input: CheckRunWrite & { head_sha: string; external_id: string; details_url: string },
  ): Promise<number> {
    const octokit = await this.#installationClient(installationId);
    const { owner, repo } = splitRepository(repository);
    const { data } = await this.#call(() =>
      octokit.request("POST /repos/{owner}/{repo}/check-runs", {
        owner,
        repo,
        name: CHECK_RUN_NAME,
        ...input,
      }),
    );
    return Number(data.id);
  }

  async updateCheckRun(
    installationId: number,
    repository: string,
    checkRunId: number,
    input: CheckRunWrite,
  ): Promise<void> {
    const octokit = await this.#installationClient(installationId);
    const { owner, repo } = splitRepository(repository);
    await this.#call(() =>
      octokit.request("PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}", {
        owner,
        repo,
        check_run_id: checkRunId,
        ...input,
      }),
    );
  }

  /** The provider's web UI origin (where workflow run pages live). */
  get webBase(): string {
    return this.#config.webBaseUrl ?? webBaseOf(this.#config.apiBaseUrl);
  }

  /** Whether claims are provider-authorized: the app's OAuth client is configured. */
  get verifiesClaims(): boolean {
    return (this.#config.oauthClient ?? null) !== null;
  }

  /**
   * The provider's OAuth authorization page (web flow) for the app's OAuth client: the person
   * authorizes there and the provider redirects to `redirectUri` with a code and `state`.
   */
  authorizationUrl(state: string, redirectUri: string): string {
    const client = this.#oauthClient();
    const url = new URL(`${this.webBase}/login/oauth/authorize`);
    url.searchParams.set("client_id", client.clientId);
    url.searchParams.set("redirect_uri", redirectUri);
    url.searchParams.set("state", state);
    url.searchParams.set("allow_signup", "false");
    return url.href;
  }

  /**
   * The ids of the app's installations the person can reach: the web flow's code is exchanged
   * for a user-to-server token, which is used once for `GET /user/installations` (which lists
   * only this app's installations the person has access to) and dropped — never stored, never
   * logged. A refused code or a failed call is a ProviderError.
   */
  async installationsOfPerson(code: string, redirectUri: string): Promise<number[]> {
    const client = this.#oauthClient();
    const web = new Octokit({ baseUrl: this.webBase });
    const { data } = await this.#call(() =>
      web.request("POST /login/oauth/access_token", {
        client_id: client.clientId,
        client_secret: client.clientSecret,
        code,
        redirect_uri: redirectUri,
        headers: { accept: "application/json" },
      }),
    );
    const answer = data as { access_token?: unknown; error?: unknown; error_description?: unknown };
    if (typeof answer.access_token !== "string" || answer.access_token === "") {
      // The provider answers a bad code with 200 and an error member.
      throw new ProviderError(
        `the provider refused the authorization code: ${String(answer.error_description ?? answer.error ?? "no token")}`,
        400,
        null,
      );
    }
    const person = new Octokit({ baseUrl: this.#config.apiBaseUrl, auth: answer.access_token });
    const ids: number[] = [];
    for (let page = 1; ; page += 1) {
      const { data: listed } = await this.#call(() =>
        person.request("GET /user/installations", { per_page: 100, page }),
      );
      ids.push(...listed.installations.map((i) => Number(i.id)));
      if (listed.installations.length < 100 || ids.length >= listed.total_count) return ids;
    }
  }

  #oauthClient(): { clientId: string; clientSecret: string } {
    const client = this.#config.oauthClient ?? null;
    if (client === null) throw new Error("the GitHub App's OAuth client is not configured (KILN_GITHUB_CLIENT_ID)");
    return client;
  }

  /**
   * One CI workflow run of the repository, through the installation's token (the dogfood
   * trial verifies gate evidence naming a workflow run against it; rule 9).
   */
  async workflowRun(installationId: number, repository: string, runId: number): Promise<WorkflowRunInfo> {
    const octokit = await this.#installationClient(installationId);
    const { owner, repo } = splitRepository(repository);
    const { data } = await this.#call(() =>
      octokit.request("GET /repos/{owner}/{repo}/actions/runs/{run_id}", { owner, repo, run_id: runId }),
    );
    return {
      id: Number(data.id),
      repository: data.repository.full_name,
      name: data.name ?? null,
      headSha: data.head_sha,
      status: data.status ?? null,
      conclusion: data.conclusion ?? null,
      htmlUrl: data.html_url,
      updatedAt: data.updated_at,
    };
  }

  /** Verifies a webhook delivery's `X-Hub-Signature-256` against the webhook secret. */
  verifyWebhook(payload: string, signature: string): Promise<boolean> {
    return this.#app.webhooks.verify(payload, signature);
  }

  #installationClient(installationId: number) {
    return this.#call(() => this.#app.getInstallationOctokit(installationId));
  }

  /** Runs one provider call, turning its failure into a ProviderError that carries no secret. */
  async #call<T>(request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      throw providerErrorOf(error);
    }
  }
}

/** The provider's web UI origin from its API base: api.github.com → github.com, GHES `/api/v3` dropped. */
export function webBaseOf(apiBaseUrl: string): string {
  const url = new URL(apiBaseUrl);
  if (url.hostname === "api.github.com") return "https://github.com";
  return `${url.origin}${url.pathname.replace(/\/api\/v3\/?$/, "").replace(/\/+$/, "")}`;
}

function splitRepository(repository: string): { owner: string; repo: string } {
  const [owner = "", repo = ""] = repository.split("/");
  return { owner, repo };
}

function providerErrorOf(error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  const e = error as { status?: unknown; message?: unknown; response?: { headers?: Record<string, unknown> } };
  const status = typeof e.status === "number" && e.status > 0 ? e.status : null;
  const headers = e.response?.headers ?? {};
  let retryAfter: number | null = null;
  const retryAfterHeader = Number(headers["retry-after"]);
  if (Number.isFinite(retryAfterHeader) && retryAfterHeader >= 0) retryAfter = retryAfterHeader;
  else if (String(headers["x-ratelimit-remaining"]) === "0" && (status === 403 || status === 429)) {
    const reset = Number(headers["x-ratelimit-reset"]);
    if (Number.isFinite(reset)) retryAfter = Math.max(0, Math.ceil(reset - Date.now() / 1000));
  }
  // Octokit's messages name the method, path and the provider's own message, never a token.
  const message = typeof e.message === "string" ? e.message : String(error);
  return new ProviderError(status === null ? `no answer from the provider: ${message}` : message, status, retryAfter);
}
