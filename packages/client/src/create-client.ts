import { CATALOGUE, type InputOf, type Operation, type OperationId, type OutputOf } from "@kiln/contract";
import { KilnRefusal, KilnTransportError } from "./errors.js";

export interface ClientOptions {
  /** API origin, e.g. `http://127.0.0.1:7860`. */
  readonly endpoint: string;
  /** A tenant bearer credential (`kiln_cli_…` or `kiln_agent_…`). */
  readonly token?: string;
  readonly fetch?: typeof fetch;
  readonly headers?: Record<string, string>;
}

const BY_ID = new Map<string, Operation>(CATALOGUE.map((op) => [op.id, op]));

function urlOf(op: Operation, endpoint: string, params: Record<string, unknown>, query: Record<string, unknown>): URL {
  const path = op.path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new KilnTransportError(op.id, `path parameter ${name} is missing`);
    return encodeURIComponent(String(value));
  });
  const url = new URL(path, endpoint.endsWith("/") ? endpoint : `${endpoint}/`);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
  }
  return url;
}

/**
 * A typed HTTP client derived from the catalogue: `call(operationId, input)` for every
 * operation. Refusals throw KilnRefusal with the typed document; transport failures
 * throw KilnTransportError.
 */
export function createClient(options: ClientOptions) {
  const doFetch = options.fetch ?? fetch;
  async function call<Id extends OperationId>(id: Id, input: InputOf<Id>): Promise<OutputOf<Id>> {
    const op = BY_ID.get(id);
    if (op === undefined) throw new KilnTransportError(id, "not in the catalogue");
    const parts = input as {
      params?: Record<string, unknown>;
      query?: Record<string, unknown>;
      body?: unknown;
      idempotencyKey?: string;
    };
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    if (parts.idempotencyKey !== undefined) headers["idempotency-key"] = parts.idempotencyKey;
    let body: string | Uint8Array | undefined;
    if (op.request.body?.encoding === "json") {
      headers["content-type"] = "application/json";
      body = JSON.stringify(parts.body);
    } else if (op.request.body?.encoding === "bytes") {
      headers["content-type"] = "application/octet-stream";
      body = parts.body as Uint8Array;
    }
    let response: Response;
    try {
      response = await doFetch(urlOf(op, options.endpoint, parts.params ?? {}, parts.query ?? {}), {
        method: op.method,
        headers,
        ...(body === undefined ? {} : { body }),
      });
    } catch (error) {
      throw new KilnTransportError(id, "the request failed", { cause: error });
    }
    if (response.status >= 400) {
      const text = await response.text();
      let document: unknown;
      try {
        document = JSON.parse(text);
      } catch {
        throw new KilnTransportError(id, `HTTP ${response.status} without a Refusal document`);
      }
      throw new KilnRefusal(id, document as KilnRefusal["refusal"]);
    }
    switch (op.response.encoding) {
      case "json":
        return (await response.json()) as OutputOf<Id>;
      case "bytes":
        return new Uint8Array(await response.arrayBuffer()) as OutputOf<Id>;
      case "sse":
        return response as OutputOf<Id>;
      case "none":
        return undefined as OutputOf<Id>;
    }
  }
  return { call };
}

export type KilnClient = ReturnType<typeof createClient>;
