import type { Clock } from "@kiln/contract";
import { GatewayError } from "./gateway-error.js";
import { indexPathOf } from "./index-path.js";

/** One version's line of a registry index (the members the gateway reads; the line is kept verbatim). */
export interface IndexEntry {
  readonly name: string;
  readonly vers: string;
  readonly cksum: string;
  readonly deps: readonly { name: string; package?: string | null; kind?: string | null; registry?: string | null }[];
}

export interface IndexLine {
  readonly entry: IndexEntry;
  /** The line as the registry served it, written unchanged into the job's local registry. */
  readonly text: string;
}

/** How often and how patiently an upstream is retried before the job fails naming it. */
export interface RetryPolicy {
  readonly attempts: number;
  readonly firstDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, firstDelayMs: 250 };

/**
 * A sparse registry reached over HTTP (cargo's sparse protocol: `config.json`, one index file
 * per crate, downloads at the `dl` template). `authorization`, when given, is presented on
 * every request, as cargo presents a token to an `auth-required` registry; it never appears in
 * an error or a log line.
 */
export class SparseRegistryClient {
  readonly #base: string;
  #dl: Promise<string> | null = null;

  constructor(
    /** `sparse+https://…/` as cargo names it. */
    readonly indexUrl: string,
    private readonly options: {
      readonly clock: Clock;
      readonly authorization?: string;
      readonly retry?: RetryPolicy;
      readonly signal?: AbortSignal;
    },
  ) {
    if (!indexUrl.startsWith("sparse+")) {
      throw new GatewayError(
        "unsupported_source",
        `${indexUrl} is not a sparse registry; the dependency gateway reaches registries by the sparse protocol only`,
      );
    }
    const base = indexUrl.slice("sparse+".length);
    this.#base = base.endsWith("/") ? base : `${base}/`;
  }

  /** Every version of `name` the registry lists, or null when it does not know the crate. */
  async index(name: string): Promise<IndexLine[] | null> {
    const response = await this.#get(`${this.#base}${indexPathOf(name)}`, { notFound: "null" });
    if (response === null) return null;
    const text = Buffer.from(response).toString("utf8");
    const lines: IndexLine[] = [];
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      try {
        lines.push({ entry: JSON.parse(line) as IndexEntry, text: line });
      } catch {
        throw new GatewayError(
          "upstream_refused",
          `${this.indexUrl} served an index line for ${name} that is not JSON`,
        );
      }
    }
    return lines;
  }

  /** The `.crate` bytes of one version (not yet verified: the caller checks them against the lock). */
  async download(name: string, version: string, checksum: string): Promise<Uint8Array> {
    const bytes = await this.#get(this.#downloadUrl(await this.#dlTemplate(), name, version, checksum), {
      notFound: "throw",
    });
    if (bytes === null) throw new GatewayError("unknown_crate", `${this.indexUrl} has no ${name} ${version}`);
    return bytes;
  }

  #dlTemplate(): Promise<string> {
    this.#dl ??= this.#get(`${this.#base}config.json`, { notFound: "throw" }).then((bytes) => {
      const config = JSON.parse(Buffer.from(bytes ?? new Uint8Array()).toString("utf8")) as { dl?: unknown };
      if (typeof config.dl !== "string") {
        throw new GatewayError("upstream_refused", `${this.indexUrl} config.json names no download location (dl)`);
      }
      return config.dl;
    });
    // A failed read is not remembered: the next crate asks again.
    this.#dl.catch(() => {
      this.#dl = null;
    });
    return this.#dl;
  }

  #downloadUrl(dl: string, name: string, version: string, checksum: string): string {
    const lower = name.toLowerCase();
    const prefix = indexPathOf(name).split("/").slice(0, -1).join("/");
    if (!/\{(crate|version|prefix|lowerprefix|sha256-checksum)\}/.test(dl)) return `${dl}/${name}/${version}/download`;
    return dl
      .replaceAll("{crate}", name)
      .replaceAll("{version}", version)
      .replaceAll("{prefix}", prefix)
      .replaceAll("{lowerprefix}", prefix.toLowerCase())
      .replaceAll("{sha256-checksum}", checksum)
      .replaceAll("{lowercrate}", lower);
  }

  /**
   * GET with retries: a network error, 429 or 5xx is retried with exponential backoff on the
   * clock; 401/403 is the registry refusing the credential (not retried); 404 is an unknown
   * crate or version.
   */
  async #get(url: string, how: { notFound: "null" | "throw" }): Promise<Uint8Array | null> {
    const retry = this.options.retry ?? DEFAULT_RETRY;
    const headers: Record<string, string> = { "user-agent": "kiln-dependency-gateway" };
    if (this.options.authorization !== undefined) headers.authorization = this.options.authorization;
    let last = "";
    for (let attempt = 1; attempt <= retry.attempts; attempt++) {
      let response: Response;
      try {
        response = await fetch(url, { headers, redirect: "follow", signal: this.options.signal ?? null });
      } catch (error) {
        if (this.options.signal?.aborted === true) throw error;
        last = `${(error as Error).message}${(error as { cause?: { code?: string } }).cause?.code === undefined ? "" : ` (${(error as { cause: { code: string } }).cause.code})`}`;
        await this.#backoff(attempt, retry);
        continue;
      }
      if (response.ok) return new Uint8Array(await response.arrayBuffer());
      await response.body?.cancel();
      if (response.status === 404 || response.status === 410) {
        if (how.notFound === "null") return null;
        throw new GatewayError("unknown_crate", `${this.indexUrl} answered ${response.status} for ${pathOf(url)}`);
      }
      if (response.status === 401 || response.status === 403) {
        throw new GatewayError(
          "upstream_refused",
          `${this.indexUrl} refused ${this.options.authorization === undefined ? "the request without a credential" : "the tenant's registry credential"} (HTTP ${response.status})`,
        );
      }
      if (response.status !== 429 && response.status < 500) {
        throw new GatewayError(
          "upstream_refused",
          `${this.indexUrl} answered HTTP ${response.status} for ${pathOf(url)}`,
        );
      }
      last = `HTTP ${response.status}`;
      await this.#backoff(attempt, retry);
    }
    throw new GatewayError(
      "upstream_unreachable",
      `${this.indexUrl} could not be reached for ${pathOf(url)} after ${retry.attempts} tries: ${last}`,
    );
  }

  async #backoff(attempt: number, retry: RetryPolicy): Promise<void> {
    if (attempt < retry.attempts)
      await this.options.clock.sleep(retry.firstDelayMs * 2 ** (attempt - 1), this.options.signal);
  }
}

function pathOf(url: string): string {
  return new URL(url).pathname;
}
