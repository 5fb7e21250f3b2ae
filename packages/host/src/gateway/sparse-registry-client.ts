import type { EgressHttp, Presentation } from "./egress-http.js";
import { shownUrl } from "./egress-policy.js";
import { bytesText, type FetchBounds } from "./fetch-bounds.js";
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

/** Where a download went: its size and SHA-256, computed as it streamed in. */
export interface Downloaded {
  readonly size: number;
  readonly sha256: string;
}

const isString = (value: unknown): value is string => typeof value === "string";

/**
 * A sparse registry reached over HTTP (cargo's sparse protocol: `config.json`, one index file
 * per crate, downloads at the `dl` template), through the gateway's EgressHttp (the egress
 * policy, bounds and retries). `present` gives each request's URL its credential — the
 * tenant's credential for exactly that origin, over https — as cargo presents a token to an
 * `auth-required` registry; it never appears in an error or a log line. Nothing the registry
 * sends is quoted in a message: a line that is not an index entry is named by its number.
 */
export class SparseRegistryClient {
  readonly #base: string;
  #dl: Promise<string> | null = null;

  constructor(
    /** `sparse+https://…/` as cargo names it. */
    readonly indexUrl: string,
    private readonly options: {
      readonly http: EgressHttp;
      readonly bounds: FetchBounds;
      readonly present?: (url: URL) => Presentation;
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

  #get(
    url: string,
    what: string,
    maxBytes: number,
    boundName: string,
    into: "memory" | { file: string },
    fromUpstream = false,
  ) {
    return this.options.http.get(url, {
      what,
      maxBytes,
      boundName,
      into,
      fromUpstream,
      ...(this.options.present === undefined ? {} : { present: this.options.present }),
    });
  }

  /** Every version of `name` the registry lists, or null when it does not know the crate. */
  async index(name: string): Promise<IndexLine[] | null> {
    const { bounds } = this.options;
    const what = `the index file of ${name} from ${this.indexUrl}`;
    const answer = await this.#get(
      `${this.#base}${indexPathOf(name)}`,
      what,
      bounds.indexFileBytes,
      "the bound on one index file",
      "memory",
    );
    if (!answer.found || answer.bytes === null) return null;
    const lines: IndexLine[] = [];
    let start = 0;
    let number = 0;
    const body = answer.bytes;
    while (start < body.length) {
      let end = body.indexOf(10, start);
      if (end === -1) end = body.length;
      number++;
      if (end - start > bounds.indexLineBytes) {
        throw new GatewayError(
          "too_large",
          `${what}: line ${number} is longer than ${bytesText(bounds.indexLineBytes)}, the bound on one index line`,
        );
      }
      const text = body.toString("utf8", start, end);
      start = end + 1;
      if (text.trim() === "") continue;
      let entry: unknown;
      try {
        entry = JSON.parse(text);
      } catch {
        throw new GatewayError("upstream_refused", `${what}: line ${number} is not JSON`);
      }
      const e = entry as Partial<IndexEntry> | null;
      if (
        typeof e !== "object" ||
        e === null ||
        !isString(e.name) ||
        !isString(e.vers) ||
        !isString(e.cksum) ||
        (e.deps !== undefined && !Array.isArray(e.deps))
      ) {
        throw new GatewayError("upstream_refused", `${what}: line ${number} is not an index entry (name, vers, cksum)`);
      }
      lines.push({ entry: { ...(e as IndexEntry), deps: e.deps ?? [] }, text });
    }
    return lines;
  }

  /**
   * Streams the `.crate` bytes of one version into `file` (not yet verified: the caller checks
   * the digest against the lock), bounded by the crate size bound and the job's budget.
   */
  async download(name: string, version: string, checksum: string, file: string): Promise<Downloaded> {
    const url = this.#downloadUrl(await this.#dlTemplate(), name, version, checksum);
    const answer = await this.#get(
      url,
      `${name} ${version} from ${this.indexUrl}`,
      this.options.bounds.crateBytes,
      "the bound on one crate",
      { file },
      // The download location is the registry's config.json's word.
      true,
    );
    if (!answer.found) {
      throw new GatewayError(
        "unknown_crate",
        `${this.indexUrl} has no download of ${name} ${version} (at ${shownUrl(url, true)})`,
      );
    }
    return { size: answer.size, sha256: answer.sha256 };
  }

  #dlTemplate(): Promise<string> {
    this.#dl ??= (async () => {
      const what = `the configuration of ${this.indexUrl}`;
      const answer = await this.#get(
        `${this.#base}config.json`,
        what,
        this.options.bounds.configBytes,
        "the bound on a registry's config.json",
        "memory",
      );
      if (!answer.found || answer.bytes === null) {
        throw new GatewayError("upstream_refused", `${what}: ${this.indexUrl} has no config.json`);
      }
      let config: unknown;
      try {
        config = JSON.parse(answer.bytes.toString("utf8"));
      } catch {
        throw new GatewayError("upstream_refused", `${what}: config.json is not JSON`);
      }
      const dl = (config as { dl?: unknown } | null)?.dl;
      if (typeof dl !== "string" || dl.length === 0 || dl.length > 2048) {
        throw new GatewayError("upstream_refused", `${what}: config.json names no download location (dl)`);
      }
      return dl;
    })();
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
}
