import { createClient, type KilnClient } from "./create-client.js";
import { KilnTransportError } from "./errors.js";

/** The cookie operator.session.create sets and every operator operation reads (spec: operator session). */
export const OPERATOR_SESSION_COOKIE = "kiln_operator_session";

export interface OperatorSessionOptions {
  /** API origin, e.g. `http://127.0.0.1:7860`. */
  readonly endpoint: string;
  /** The operator bootstrap credential (`kiln_operator_…`); presented once, as a bearer token. */
  readonly credential: string;
  readonly fetch?: typeof fetch;
}

export interface OperatorSession {
  /** A client whose requests carry the operator session cookie and kiln's own Origin. */
  readonly client: KilnClient;
  /** Ends the session (operator.session.delete), so a finished command leaves no live session behind. */
  close(): Promise<void>;
}

/** The value of `name` among a response's Set-Cookie headers, when it sets a non-empty one. */
function cookieValue(setCookies: readonly string[], name: string): string | undefined {
  for (const line of setCookies) {
    const pair = line.split(";", 1)[0] ?? "";
    const equals = pair.indexOf("=");
    if (equals !== -1 && pair.slice(0, equals).trim() === name) {
      const value = pair.slice(equals + 1).trim();
      if (value !== "") return value;
    }
  }
  return undefined;
}

/**
 * Opens an operator session the way the spec has it: the bootstrap credential goes to
 * operator.session.create as a bearer token, exactly once, and the session cookie it sets is
 * what later operations present. The operator surface refuses a cookie-authenticated mutation
 * that names neither kiln's own Origin nor `Sec-Fetch-Site: same-origin` (its CSRF lock); a
 * program is no page, so the client names the origin it speaks to, which is the one the server
 * accepts as its own (`<protocol>://<host>` of the request).
 */
export async function openOperatorSession(options: OperatorSessionOptions): Promise<OperatorSession> {
  const doFetch = options.fetch ?? fetch;
  let setCookies: string[] = [];
  // Only this one request sees the bearer credential; the fetch wrapper keeps its Set-Cookie.
  const capturing: typeof fetch = async (input, init) => {
    const response = await doFetch(input, init);
    setCookies = response.headers.getSetCookie();
    return response;
  };
  await createClient({ endpoint: options.endpoint, token: options.credential, fetch: capturing }).call(
    "operator.session.create",
    {},
  );
  const session = cookieValue(setCookies, OPERATOR_SESSION_COOKIE);
  if (session === undefined) {
    throw new KilnTransportError("operator.session.create", `the answer set no ${OPERATOR_SESSION_COOKIE} cookie`);
  }
  const client = createClient({
    endpoint: options.endpoint,
    fetch: doFetch,
    headers: { cookie: `${OPERATOR_SESSION_COOKIE}=${session}`, origin: new URL(options.endpoint).origin },
  });
  return { client, close: () => client.call("operator.session.delete", {}) };
}
