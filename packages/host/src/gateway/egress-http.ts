import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { rootCertificates } from "node:tls";
import type { Clock } from "@kiln/contract";
import { type EgressPolicy, shownUrl } from "./egress-policy.js";
import { bytesText, type FetchBounds, type FetchBudget } from "./fetch-bounds.js";
import { GatewayError } from "./gateway-error.js";

/** How often and how patiently an upstream is retried before the job fails naming it. */
export interface RetryPolicy {
  readonly attempts: number;
  readonly firstDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, firstDelayMs: 250 };

/** What the caller presents to an origin: its credential there, or a refusal to ask it at all. */
export type Presentation = { readonly authorization: string } | { readonly refused: string } | null;

export interface EgressGet {
  /** What is fetched, for messages ("the index file of serde from sparse+https://…"). */
  readonly what: string;
  /** The most bytes the response body may have. */
  readonly maxBytes: number;
  /** Names the bound in the refusal: "the 64 MiB bound on one crate". */
  readonly boundName: string;
  /** Where the body goes: kept (small, bounded bodies) or streamed into a file, hashed as it arrives. */
  readonly into: "memory" | { readonly file: string };
  /** The credential for each hop's URL (asked again after every redirect). */
  readonly present?: (url: URL) => Presentation;
  /** The URL came from an upstream (a config.json's `dl`): messages show its origin only. */
  readonly fromUpstream?: boolean;
}

export type EgressAnswer =
  | { readonly found: false }
  | { readonly found: true; readonly bytes: Buffer; readonly size: number; readonly sha256: string }
  | { readonly found: true; readonly bytes: null; readonly size: number; readonly sha256: string };

/** An attempt that may succeed if tried again (a connection failure, a timeout, 429, 5xx). */
class Transient extends Error {}

/**
 * GET for the dependency gateway, one place for what every fetch must do (issue 33): the
 * egress policy on every URL and on the address of every connection (the `lookup` of each
 * socket is the policy's), redirects followed here (never by the HTTP stack), each hop checked
 * and presented its own credential only; `accept-encoding: identity` and no decoding, so the
 * bytes counted are the bytes received (a gzip bomb stays 2 MB); a size bound per response and
 * the job's byte budget counted as bytes arrive, a body streamed into its file and hashed as it
 * streams (never held whole); an idle timeout on every request; retries with backoff on the
 * clock that stop the moment the job's signal aborts.
 *
 * Messages name the URL (without query or credentials) and what went wrong in kiln's words:
 * an HTTP status, never a body, header or parser message of the upstream's.
 */
export class EgressHttp {
  readonly #http: HttpAgent;
  readonly #https: HttpsAgent;

  constructor(
    private readonly options: {
      readonly policy: EgressPolicy;
      readonly bounds: FetchBounds;
      readonly budget: FetchBudget;
      readonly clock: Clock;
      readonly retry?: RetryPolicy;
      readonly signal?: AbortSignal;
      /** PEM certificates trusted besides the system's (KILN_GATEWAY_CA_FILE). */
      readonly extraCa?: string;
    },
  ) {
    this.#http = new HttpAgent({ keepAlive: true, maxSockets: 8 });
    this.#https = new HttpsAgent({
      keepAlive: true,
      maxSockets: 8,
      ...(options.extraCa === undefined ? {} : { ca: [...rootCertificates, options.extraCa] }),
    });
  }

  /** Closes kept-alive connections. */
  close(): void {
    this.#http.destroy();
    this.#https.destroy();
  }

  /**
   * The socket's lookup for a request to `url`: the policy resolves the name and returns only
   * addresses it permits, so the connection is made to an address that was checked (no second
   * resolution to rebind). A kept-alive socket is reused only for the same host and port, whose
   * address was checked when it connected.
   */
  #lookupFor(url: URL, fromUpstream: boolean): LookupFunction {
    return (_hostname, lookupOptions, callback) => {
      this.options.policy.addressesFor(url, "the connection to", fromUpstream).then(
        (addresses) => {
          if ((lookupOptions as { all?: boolean }).all === true) {
            (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [...addresses]);
          } else {
            const [first] = addresses;
            callback(null, first?.address ?? "", first?.family ?? 4);
          }
        },
        (error: unknown) => callback(error as NodeJS.ErrnoException, "", 4),
      );
    };
  }

  /** GETs `raw`, retrying transient failures; `{ found: false }` on 404 or 410. */
  async get(raw: string, request: EgressGet): Promise<EgressAnswer> {
    const retry = this.options.retry ?? { attempts: 1, firstDelayMs: 0 };
    let last = "";
    for (let attempt = 1; attempt <= retry.attempts; attempt++) {
      this.#throwIfAborted();
      try {
        return await this.#follow(raw, request);
      } catch (error) {
        this.#throwIfAborted();
        if (!(error instanceof Transient)) throw error;
        last = error.message;
      }
      if (attempt < retry.attempts) {
        await this.options.clock.sleep(retry.firstDelayMs * 2 ** (attempt - 1), this.options.signal);
      }
    }
    throw new GatewayError(
      last.includes("timed out") ? "timed_out" : "upstream_unreachable",
      `${request.what}: ${shownUrl(raw, request.fromUpstream === true)} ${last} (${retry.attempts} ${retry.attempts === 1 ? "try" : "tries"})`,
    );
  }

  #throwIfAborted(): void {
    const signal = this.options.signal;
    if (signal?.aborted === true) throw signal.reason ?? new Error("aborted");
  }

  /**
   * One try: the request and every redirect it is answered with. A redirect's target is an
   * upstream's word: it is checked like any URL and shown by its origin only.
   */
  async #follow(raw: string, request: EgressGet): Promise<EgressAnswer> {
    const { policy, bounds } = this.options;
    let current = raw;
    let fromUpstream = request.fromUpstream === true;
    for (let hop = 0; hop <= bounds.redirects; hop++) {
      const what = hop === 0 ? request.what : `${request.what}: a redirect to`;
      const url = policy.checkUrl(current, "registry", what, fromUpstream);
      const named = `${request.what}: ${shownUrl(url, fromUpstream)}`;
      const presentation = request.present?.(url) ?? null;
      if (presentation !== null && "refused" in presentation) {
        throw new GatewayError("egress_refused", `${named} is refused: ${presentation.refused}`);
      }
      const response = await this.#request(url, presentation?.authorization, fromUpstream, request.what);
      const status = response.statusCode ?? 0;
      if ([301, 302, 303, 307, 308].includes(status)) {
        const location = response.headers.location;
        response.destroy();
        if (location === undefined)
          throw new GatewayError("upstream_refused", `${named} answered a redirect without a location`);
        try {
          current = new URL(location, url).toString();
        } catch {
          throw new GatewayError("upstream_refused", `${named} redirected to something that is not a URL`);
        }
        fromUpstream = true;
        continue;
      }
      return this.#answer(named, response, request, presentation !== null);
    }
    throw new GatewayError(
      "upstream_refused",
      `${request.what}: ${shownUrl(raw, request.fromUpstream === true)} redirected more than ${bounds.redirects} times`,
    );
  }

  #request(url: URL, authorization: string | undefined, fromUpstream: boolean, what: string): Promise<IncomingMessage> {
    const https = url.protocol === "https:";
    const headers: Record<string, string> = {
      "user-agent": "kiln-dependency-gateway",
      "accept-encoding": "identity",
    };
    if (authorization !== undefined) headers.authorization = authorization;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(
        url,
        {
          method: "GET",
          headers,
          agent: https ? this.#https : this.#http,
          lookup: this.#lookupFor(url, fromUpstream),
          timeout: this.options.bounds.idleTimeoutMs,
          ...(this.options.signal === undefined ? {} : { signal: this.options.signal }),
        },
        resolve,
      );
      req.on("timeout", () =>
        req.destroy(new Transient(`timed out (nothing for ${this.options.bounds.idleTimeoutMs / 1000} s)`)),
      );
      req.on("error", (error) => {
        if (error instanceof GatewayError || error instanceof Transient) reject(error);
        else if (this.options.signal?.aborted === true) reject(this.options.signal.reason ?? error);
        else reject(new Transient(`could not be reached (${connectionFailure(error)})`));
      });
      req.end();
    }).catch((error: unknown) => {
      if (error instanceof GatewayError) {
        // The policy refused the resolved address: say which fetch it was.
        throw new GatewayError(error.kind, `${what}: ${error.message.replace(/^the connection to /, "")}`);
      }
      throw error;
    });
  }

  async #answer(
    named: string,
    response: IncomingMessage,
    request: EgressGet,
    presented: boolean,
  ): Promise<EgressAnswer> {
    const status = response.statusCode ?? 0;
    if (status !== 200) {
      response.destroy();
      if (status === 404 || status === 410) return { found: false };
      if (status === 401 || status === 403) {
        throw new GatewayError(
          "upstream_refused",
          `${named} refused ${presented ? "the tenant's registry credential" : "the request without a credential"} (HTTP ${status})`,
        );
      }
      if (status === 429 || status >= 500) throw new Transient(`answered HTTP ${status}`);
      throw new GatewayError("upstream_refused", `${named} answered HTTP ${status}`);
    }
    const encoding = String(response.headers["content-encoding"] ?? "identity")
      .trim()
      .toLowerCase();
    if (encoding !== "identity" && encoding !== "") {
      response.destroy();
      // Named only when it is an encoding HTTP defines: the header is the upstream's text.
      const known = ["gzip", "x-gzip", "deflate", "br", "compress", "zstd"].includes(encoding) ? `a ${encoding}` : "an";
      throw new GatewayError(
        "upstream_refused",
        `${named} sent ${known}-encoded body though the gateway asked for identity; the gateway never decodes a body (it takes at most ${bytesText(request.maxBytes)}, ${request.boundName}, as sent)`,
      );
    }
    const declared = Number(response.headers["content-length"] ?? Number.NaN);
    const tooLarge = () =>
      new GatewayError("too_large", `${named} is larger than ${bytesText(request.maxBytes)}, ${request.boundName}`);
    if (Number.isFinite(declared) && declared > request.maxBytes) {
      response.destroy();
      throw tooLarge();
    }
    if (Number.isFinite(declared) && this.options.budget.wouldExceed(declared)) {
      response.destroy();
      this.options.budget.take(declared, named);
    }
    const hash = createHash("sha256");
    let size = 0;
    const kept: Buffer[] = [];
    const file = request.into === "memory" ? null : await open(request.into.file, "w", 0o644);
    try {
      for await (const chunk of response as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > request.maxBytes) throw tooLarge();
        this.options.budget.take(chunk.length, named);
        hash.update(chunk);
        if (file === null) kept.push(chunk);
        else await file.write(chunk);
      }
    } catch (error) {
      response.destroy();
      if (error instanceof GatewayError) throw error;
      this.#throwIfAborted();
      throw new Transient(`broke off the response (${connectionFailure(error)})`);
    } finally {
      await file?.close();
    }
    if (Number.isFinite(declared) && size !== declared) throw new Transient("sent fewer bytes than it announced");
    const sha256 = hash.digest("hex");
    return file === null
      ? { found: true, bytes: Buffer.concat(kept), size, sha256 }
      : { found: true, bytes: null, size, sha256 };
  }
}

/** A connection failure in kiln's words (the system error's code, never a message an upstream shaped). */
function connectionFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (error instanceof Transient) return error.message;
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ECONNRESET":
    case "EPIPE":
      return "connection reset";
    case "ETIMEDOUT":
      return "connection timed out";
    case "ENETUNREACH":
    case "EHOSTUNREACH":
      return "no route to the host";
    case undefined:
      return "connection failed";
    default:
      return code.startsWith("ERR_TLS") ||
        code.includes("CERT") ||
        code.startsWith("DEPTH_ZERO") ||
        code.startsWith("SELF_SIGNED")
        ? `TLS failed: ${code}`
        : `connection failed: ${code}`;
  }
}
