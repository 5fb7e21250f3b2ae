import { createHmac, generateKeyPairSync, randomBytes, verify } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

/**
 * A local simulator of the GitHub REST API, just the endpoints kiln's Octokit client calls,
 * on 127.0.0.1, for tests: the app's RS256 JWT verified against the app's public key,
 * installation tokens (`ghs_…`, one hour), installations and their repositories, repositories'
 * default branches and merge bases (compare), CI workflow runs (read only), and check runs (at most 50 annotations per
 * request, as the provider refuses more with 422; later updates append annotations). Response
 * members follow the provider's documented shapes for what kiln reads, plus the usual
 * neighbours. Failures are injected per route (`failNext`) with optional headers (Retry-After,
 * rate limits); every request is recorded.
 *
 * It also plays the provider's two other sides: the web UI's OAuth web flow for the app's
 * user-to-server tokens (`/login/oauth/authorize` answers as the person `signedIn` as,
 * `/login/oauth/access_token` redeems a code once, `GET /user/installations` lists the
 * installations that person can reach), and webhook deliveries to kiln (`delivery`: signed with
 * the webhook secret as the provider signs them, or with a wrong signature).
 */
export interface SimulatedRepository {
  readonly defaultBranch: string;
  /** Branch or tag → commit id. */
  readonly refs: Record<string, string>;
  /** Commit id → its parents. */
  readonly commits: Record<string, readonly string[]>;
}

export interface SimulatedCheckRun {
  id: number;
  repository: string;
  name: string;
  head_sha: string;
  external_id: string | null;
  details_url: string | null;
  status: string;
  conclusion: string | null;
  started_at: string | null;
  completed_at: string | null;
  output: { title: string | null; summary: string | null };
  annotations: { path: string; start_line: number; annotation_level: string; message: string; title?: string }[];
  /** Every status it was written with, in order. */
  statuses: string[];
}

export interface SimulatedWorkflowRun {
  readonly repository: string;
  readonly name: string;
  readonly head_sha: string;
  readonly status: string;
  readonly conclusion: string | null;
}

/** A person on the provider and the installations their account can reach. */
export interface SimulatedUser {
  readonly installations: number[];
}

/** A webhook delivery as the provider would POST it. */
export interface SimulatedDelivery {
  readonly headers: Record<string, string>;
  readonly body: string;
}

interface Injected {
  readonly status: number;
  readonly headers?: Record<string, string>;
}

export class GitHubSimulator {
  readonly appId = "4242";
  readonly privateKey: string;
  readonly webhookSecret = "simulated-webhook-secret";
  readonly installations = new Map<number, { account: string; suspended: boolean; repositories: string[] }>();
  readonly repositories = new Map<string, SimulatedRepository>();
  readonly checkRuns: SimulatedCheckRun[] = [];
  /** CI workflow runs by id (GET /repos/{owner}/{repo}/actions/runs/{id}). */
  readonly workflowRuns = new Map<number, SimulatedWorkflowRun>();
  readonly requests: { method: string; path: string; status: number }[] = [];
  /** The app's OAuth client (user-to-server tokens). */
  readonly clientId = "Iv1.simulatedclient";
  readonly clientSecret = "simulated-client-secret";
  /** Login → the person, for the OAuth web flow. */
  readonly users = new Map<string, SimulatedUser>();
  /** Who is signed in to the provider's web UI (whom /login/oauth/authorize authorizes). */
  signedIn: string | null = null;
  /** Every user-to-server token issued (tests check kiln does not keep them). */
  readonly userTokensIssued: string[] = [];
  readonly #codes = new Map<string, { login: string; redirectUri: string }>();
  readonly #userTokens = new Map<string, string>();
  #deliveries = 0;
  readonly #publicKey: string;
  readonly #tokens = new Map<string, { installation: number; expires: number }>();
  readonly #failures: { method: string; pattern: RegExp; queue: Injected[] }[] = [];
  #server: Server | null = null;
  #url = "";

  constructor() {
    const pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
    this.privateKey = pair.privateKey.export({ type: "pkcs1", format: "pem" }).toString();
    this.#publicKey = pair.publicKey.export({ type: "spki", format: "pem" }).toString();
  }

  get url(): string {
    return this.#url;
  }

  /** The next requests matching `method` and `pattern` (on the path) answer these statuses, in order. */
  failNext(method: string, pattern: RegExp, ...answers: Injected[]): void {
    this.#failures.push({ method, pattern, queue: [...answers] });
  }

  /** The webhook signature header the provider would send for `payload`. */
  sign(payload: string): string {
    return `sha256=${createHmac("sha256", this.webhookSecret).update(payload).digest("hex")}`;
  }

  /**
   * A webhook delivery of `event` with `payload`, signed as the provider signs it (HMAC-SHA256
   * of the body with the webhook secret), with a fresh delivery id unless one is given (a
   * replay reuses one); `signature: "bad"` signs with another secret, `"none"` omits it.
   */
  delivery(
    event: string,
    payload: unknown,
    options: { deliveryId?: string; signature?: "good" | "bad" | "none" } = {},
  ): SimulatedDelivery {
    const body = JSON.stringify(payload);
    const signature = options.signature ?? "good";
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": "GitHub-Hookshot/simulated",
      "x-github-event": event,
      "x-github-delivery":
        options.deliveryId ?? `00000000-0000-4000-8000-${String(++this.#deliveries).padStart(12, "0")}`,
      "x-github-hook-installation-target-type": "integration",
    };
    if (signature === "good") headers["x-hub-signature-256"] = this.sign(body);
    if (signature === "bad") {
      headers["x-hub-signature-256"] = `sha256=${createHmac("sha256", "not-the-secret").update(body).digest("hex")}`;
    }
    return { headers, body };
  }

  /** POSTs a delivery to kiln's webhook URL, as the provider does; the answer's status and body. */
  async deliver(url: string, delivery: SimulatedDelivery): Promise<{ status: number; body: string }> {
    const res = await fetch(url, { method: "POST", headers: delivery.headers, body: delivery.body });
    return { status: res.status, body: await res.text() };
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      void this.#handle(req, res).catch((error: unknown) => {
        this.#send(res, req, 500, { message: String(error) });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("simulator did not bind");
    this.#server = server;
    this.#url = `http://127.0.0.1:${address.port}`;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    if (server === null) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #send(
    res: ServerResponse,
    req: IncomingMessage,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) {
    this.requests.push({ method: req.method ?? "", path: (req.url ?? "").split("?")[0] ?? "", status });
    res.writeHead(status, {
      "content-type": "application/json; charset=utf-8",
      "x-ratelimit-limit": "5000",
      "x-ratelimit-remaining": "4999",
      "x-ratelimit-reset": String(Math.floor(Date.now() / 1000) + 3600),
      ...headers,
    });
    res.end(JSON.stringify(body));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const body = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
    const url = new URL(req.url ?? "/", "http://simulator");
    const path = url.pathname;
    const method = req.method ?? "GET";
    const send = (status: number, payload: unknown, headers?: Record<string, string>) =>
      this.#send(res, req, status, payload, headers);

    for (const failure of this.#failures) {
      if (failure.method === method && failure.pattern.test(path) && failure.queue.length > 0) {
        const injected = failure.queue.shift() as Injected;
        return send(injected.status, { message: `injected ${injected.status}` }, injected.headers);
      }
    }

    const auth = req.headers.authorization ?? "";

    // The web UI's OAuth web flow (the app's user-to-server tokens).
    if (path === "/login/oauth/authorize" && method === "GET") {
      const redirectUri = url.searchParams.get("redirect_uri") ?? "";
      if (url.searchParams.get("client_id") !== this.clientId || redirectUri === "") {
        return send(404, { message: "Not Found" });
      }
      if (this.signedIn === null) return send(401, { message: "sign in to the provider first" });
      const code = randomBytes(10).toString("hex");
      this.#codes.set(code, { login: this.signedIn, redirectUri });
      const back = new URL(redirectUri);
      back.searchParams.set("code", code);
      back.searchParams.set("state", url.searchParams.get("state") ?? "");
      return send(302, {}, { location: back.href });
    }
    if (path === "/login/oauth/access_token" && method === "POST") {
      const pending = typeof body.code === "string" ? this.#codes.get(body.code) : undefined;
      if (body.client_id !== this.clientId || body.client_secret !== this.clientSecret) {
        return send(200, {
          error: "incorrect_client_credentials",
          error_description: "The client_id and/or client_secret passed are incorrect.",
          error_uri: "",
        });
      }
      if (pending === undefined || (body.redirect_uri !== undefined && body.redirect_uri !== pending.redirectUri)) {
        return send(200, {
          error: "bad_verification_code",
          error_description: "The code passed is incorrect or expired.",
          error_uri: "",
        });
      }
      this.#codes.delete(body.code as string);
      const token = `ghu_${randomBytes(18).toString("base64url")}`;
      this.#userTokens.set(token, pending.login);
      this.userTokensIssued.push(token);
      return send(200, { access_token: token, token_type: "bearer", scope: "" });
    }
    if (path === "/user/installations" && method === "GET") {
      const token = /^(?:token|Bearer|bearer) (.+)$/.exec(auth)?.[1];
      const login = token === undefined ? undefined : this.#userTokens.get(token);
      if (login === undefined) return send(401, { message: "Bad credentials" });
      const ids = this.users.get(login)?.installations ?? [];
      const reachable = ids.filter((id) => this.installations.has(id));
      return send(200, {
        total_count: reachable.length,
        installations: reachable.map((id) => ({
          id,
          app_id: Number(this.appId),
          account: { login: this.installations.get(id)?.account ?? "", type: "Organization" },
        })),
      });
    }

    // App (JWT) endpoints.
    const appPath = /^\/app\/installations\/(\d+)(\/access_tokens)?$/.exec(path);
    if (appPath !== null) {
      const match = appPath;
      if (!this.#validJwt(auth)) return send(401, { message: "A JSON web token could not be decoded" });
      const id = Number(match[1]);
      const installation = this.installations.get(id);
      if (installation === undefined) return send(404, { message: "Not Found" });
      if (match[2] !== undefined && method === "POST") {
        if (installation.suspended) return send(403, { message: "This installation has been suspended" });
        const token = `ghs_${randomBytes(24).toString("base64url")}`;
        const expires = Date.now() + 3600_000;
        this.#tokens.set(token, { installation: id, expires });
        return send(201, {
          token,
          expires_at: new Date(expires).toISOString().replace(/\.\d{3}Z$/, "Z"),
          permissions: { checks: "write", contents: "read", metadata: "read" },
          repository_selection: "selected",
        });
      }
      if (method !== "GET") return send(404, { message: "Not Found" });
      return send(200, {
        id,
        app_id: Number(this.appId),
        app_slug: "kiln-test",
        target_type: "Organization",
        account: { login: installation.account, id: 1, type: "Organization" },
        repository_selection: "selected",
        permissions: { checks: "write", contents: "read", metadata: "read" },
        events: ["check_run"],
        suspended_at: installation.suspended ? new Date().toISOString() : null,
        suspended_by: null,
      });
    }

    // Installation-token endpoints.
    const holder = this.#installationOf(auth);
    if (holder === null) return send(401, { message: "Bad credentials" });
    const covered = this.installations.get(holder)?.repositories ?? [];

    if (path === "/installation/repositories" && method === "GET") {
      const perPage = Number(url.searchParams.get("per_page") ?? "30");
      const page = Number(url.searchParams.get("page") ?? "1");
      const slice = covered.slice((page - 1) * perPage, page * perPage);
      return send(200, {
        total_count: covered.length,
        repository_selection: "selected",
        repositories: slice.map((full, i) => {
          const [owner = "", name = ""] = full.split("/");
          return { id: 1000 + i, name, full_name: full, owner: { login: owner }, private: true };
        }),
      });
    }

    const match = /^\/repos\/([^/]+)\/([^/]+)(\/.*)?$/.exec(path);
    if (match === null) return send(404, { message: "Not Found" });
    const full = `${decodeURIComponent(match[1] ?? "")}/${decodeURIComponent(match[2] ?? "")}`;
    const rest = match[3] ?? "";
    if (!covered.includes(full)) return send(404, { message: "Not Found" });
    const repo = this.repositories.get(full);

    if (rest === "" && method === "GET") {
      if (repo === undefined) return send(404, { message: "Not Found" });
      return send(200, { id: 1, name: match[2], full_name: full, default_branch: repo.defaultBranch, private: true });
    }
    const compare = /^\/compare\/(.+)$/.exec(rest);
    if (compare !== null && method === "GET") {
      if (repo === undefined) return send(404, { message: "Not Found" });
      const [base = "", head = ""] = decodeURIComponent(compare[1] ?? "").split("...");
      const baseSha = resolve(repo, base);
      const headSha = resolve(repo, head);
      if (baseSha === null || headSha === null) return send(404, { message: "No commit found for the ref" });
      const mergeBase = mergeBaseOf(repo, baseSha, headSha);
      if (mergeBase === null) return send(404, { message: "No common ancestor" });
      return send(200, {
        status: mergeBase === headSha ? (baseSha === headSha ? "identical" : "behind") : "ahead",
        ahead_by: 0,
        behind_by: 0,
        total_commits: 0,
        base_commit: { sha: baseSha },
        merge_base_commit: { sha: mergeBase },
        commits: [],
        files: [],
      });
    }
    const listing = /^\/commits\/([^/]+)\/check-runs$/.exec(rest);
    if (listing !== null && method === "GET") {
      const ref = decodeURIComponent(listing[1] ?? "");
      const name = url.searchParams.get("check_name");
      const runs = this.checkRuns.filter(
        (r) => r.repository === full && r.head_sha === ref && (name === null || r.name === name),
      );
      return send(200, { total_count: runs.length, check_runs: runs.map(view) });
    }
    if (rest === "/check-runs" && method === "POST") {
      if (typeof body.name !== "string" || typeof body.head_sha !== "string") {
        return send(422, { message: "Invalid request: name and head_sha are required" });
      }
      const refusal = writeRefusal(body);
      if (refusal !== null) return send(422, { message: refusal });
      const run: SimulatedCheckRun = {
        id: 7_000_000_000 + this.checkRuns.length + 1,
        repository: full,
        name: body.name,
        head_sha: body.head_sha,
        external_id: typeof body.external_id === "string" ? body.external_id : null,
        details_url: typeof body.details_url === "string" ? body.details_url : null,
        status: "queued",
        conclusion: null,
        started_at: null,
        completed_at: null,
        output: { title: null, summary: null },
        annotations: [],
        statuses: [],
      };
      apply(run, body);
      this.checkRuns.push(run);
      return send(201, view(run));
    }
    const workflowRun = /^\/actions\/runs\/(\d+)$/.exec(rest);
    if (workflowRun !== null && method === "GET") {
      const id = Number(workflowRun[1]);
      const run = this.workflowRuns.get(id);
      if (run === undefined || run.repository !== full) return send(404, { message: "Not Found" });
      return send(200, {
        id,
        name: run.name,
        head_sha: run.head_sha,
        status: run.status,
        conclusion: run.conclusion,
        html_url: `${this.url}/${full}/actions/runs/${id}`,
        updated_at: "2026-11-22T08:00:00Z",
        repository: { id: 1, full_name: full },
      });
    }
    const update = /^\/check-runs\/(\d+)$/.exec(rest);
    if (update !== null && method === "PATCH") {
      const run = this.checkRuns.find((r) => r.id === Number(update[1]) && r.repository === full);
      if (run === undefined) return send(404, { message: "Not Found" });
      const refusal = writeRefusal(body);
      if (refusal !== null) return send(422, { message: refusal });
      apply(run, body);
      return send(200, view(run));
    }
    return send(404, { message: "Not Found" });
  }

  #validJwt(auth: string): boolean {
    const token = /^(?:Bearer|bearer) (.+)$/.exec(auth)?.[1];
    if (token === undefined) return false;
    const [header = "", payload = "", signature = ""] = token.split(".");
    const signed = verify(
      "sha256",
      Buffer.from(`${header}.${payload}`),
      this.#publicKey,
      Buffer.from(signature, "base64url"),
    );
    if (!signed) return false;
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { iss?: unknown; exp?: unknown };
    return String(claims.iss) === this.appId && typeof claims.exp === "number" && claims.exp * 1000 > Date.now();
  }

  #installationOf(auth: string): number | null {
    const token = /^(?:token|Bearer|bearer) (.+)$/.exec(auth)?.[1];
    const held = token === undefined ? undefined : this.#tokens.get(token);
    if (held === undefined || held.expires < Date.now()) return null;
    return held.installation;
  }
}

function writeRefusal(body: Record<string, unknown>): string | null {
  const output = body.output as { annotations?: unknown[]; summary?: string } | undefined;
  if ((output?.annotations?.length ?? 0) > 50) return "Only 50 annotations may be sent per request";
  if ((output?.summary?.length ?? 0) > 65535) return "output.summary is too long (maximum is 65535 characters)";
  if (body.status === "completed" && typeof body.conclusion !== "string")
    return "conclusion is required when completed";
  return null;
}

function apply(run: SimulatedCheckRun, body: Record<string, unknown>): void {
  if (typeof body.status === "string") run.status = body.status;
  if (typeof body.conclusion === "string") {
    run.conclusion = body.conclusion;
    run.status = "completed";
  }
  if (typeof body.started_at === "string") run.started_at = body.started_at;
  if (typeof body.completed_at === "string") run.completed_at = body.completed_at;
  const output = body.output as
    | { title?: string; summary?: string; annotations?: SimulatedCheckRun["annotations"] }
    | undefined;
  if (output !== undefined) {
    run.output = { title: output.title ?? null, summary: output.summary ?? null };
    run.annotations.push(...(output.annotations ?? []));
  }
  if (run.statuses.at(-1) !== run.status) run.statuses.push(run.status);
}

function view(run: SimulatedCheckRun) {
  return {
    id: run.id,
    name: run.name,
    head_sha: run.head_sha,
    external_id: run.external_id,
    details_url: run.details_url,
    status: run.status,
    conclusion: run.conclusion,
    started_at: run.started_at,
    completed_at: run.completed_at,
    output: { ...run.output, text: null, annotations_count: run.annotations.length, annotations_url: "" },
    app: { id: 4242, slug: "kiln-test" },
    pull_requests: [],
  };
}

function resolve(repo: SimulatedRepository, ref: string): string | null {
  if (ref in repo.commits) return ref;
  return repo.refs[ref] ?? null;
}

/** The nearest common ancestor (breadth-first from head over base's ancestors). */
function mergeBaseOf(repo: SimulatedRepository, base: string, head: string): string | null {
  const ancestors = new Set<string>();
  const walk = [base];
  while (walk.length > 0) {
    const sha = walk.shift() as string;
    if (ancestors.has(sha)) continue;
    ancestors.add(sha);
    walk.push(...(repo.commits[sha] ?? []));
  }
  const queue = [head];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const sha = queue.shift() as string;
    if (ancestors.has(sha)) return sha;
    if (seen.has(sha)) continue;
    seen.add(sha);
    queue.push(...(repo.commits[sha] ?? []));
  }
  return null;
}
