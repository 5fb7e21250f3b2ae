import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";
import type { Page } from "playwright-core";
import type { OidcSettings } from "../web/auth/oidc-client.js";

/** A person the local provider knows, by login name (the dev login form accepts any password). */
export interface ProviderAccount {
  readonly email: string;
  readonly name: string;
  readonly groups: readonly string[];
  /** The `email_verified` claim released; `"absent"` releases none (default true). */
  readonly emailVerified?: boolean | "absent";
}

export interface LocalOidcProvider {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** kiln's OpenID settings for this provider (its groups in `groups`). */
  settings(providerVerifiesEmails: boolean): OidcSettings;
  close(): Promise<void>;
}

async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/**
 * A real OpenID provider (panva's oidc-provider) on 127.0.0.1 at an ephemeral port, with its
 * development login and consent pages, one confidential client for `redirectUri` that must use
 * PKCE, and `accounts` as its people. Groups are released with the `openid` scope from the
 * userinfo endpoint (not the ID token), as many IdPs do.
 */
export async function startLocalOidcProvider(
  redirectUri: string,
  accounts: Readonly<Record<string, ProviderAccount>>,
): Promise<LocalOidcProvider> {
  const server = createServer();
  const port = await listenOnLoopback(server);
  const issuer = `http://127.0.0.1:${port}`;
  const clientId = "kiln";
  const clientSecret = "kiln-test-client-secret-0123456789abcdef";
  const signingKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" });
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    pkce: { methods: ["S256"], required: () => true },
    claims: { openid: ["sub", "groups"], email: ["email", "email_verified"], profile: ["name"] },
    jwks: { keys: [{ ...signingKey, kid: "test", use: "sig", alg: "RS256" }] as never },
    cookies: { keys: ["local-oidc-provider-test-cookie-key"] },
    features: { devInteractions: { enabled: true } },
    async findAccount(_ctx, sub) {
      const account = accounts[sub];
      if (account === undefined) return undefined;
      return {
        accountId: sub,
        claims: async () => ({
          sub,
          email: account.email,
          ...(account.emailVerified === "absent" ? {} : { email_verified: account.emailVerified ?? true }),
          name: account.name,
          groups: [...account.groups],
        }),
      };
    },
  });
  server.on("request", provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    settings: (providerVerifiesEmails) => ({
      issuer,
      clientId,
      clientSecret,
      groupsClaim: "groups",
      providerVerifiesEmails,
    }),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error === undefined ? resolve() : reject(error)));
      }),
  };
}

/**
 * Completes a sign-in at the provider for a browser page on its way there: the development login
 * page as `login` (any password), then the consent page. The page then returns to kiln's callback.
 */
export async function signInAtProvider(page: Page, issuer: string, login: string): Promise<void> {
  await page.waitForURL(`${issuer}/interaction/**`);
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', "any password");
  await page.click('button[type="submit"]');
  await page.waitForSelector('input[name="prompt"][value="consent"]', { state: "attached" });
  await page.click('button[type="submit"]');
}

/** What kiln's callback answered at the end of a sign-in driven over plain HTTP. */
export interface CallbackAnswer {
  readonly status: number;
  readonly location: string | null;
  readonly body: string;
  readonly setCookies: readonly string[];
}

/**
 * The same sign-in as signInAtProvider without a browser: from kiln's `/auth/oidc/start` through
 * the provider's development login (any password) and consent forms, carrying cookies as a
 * browser would (both servers are on 127.0.0.1, where cookies do not tell ports apart), up to
 * kiln's answer at its callback, which is returned unfollowed.
 */
export async function signInOverHttp(kilnBase: string, callbackPath: string, login: string): Promise<CallbackAnswer> {
  const jar = new Map<string, string>();
  const send = async (url: URL, form?: Record<string, string>) => {
    const response = await fetch(url, {
      method: form === undefined ? "GET" : "POST",
      redirect: "manual",
      headers: {
        cookie: [...jar].map(([name, value]) => `${name}=${value}`).join("; "),
        ...(form === undefined ? {} : { "content-type": "application/x-www-form-urlencoded" }),
      },
      ...(form === undefined ? {} : { body: new URLSearchParams(form).toString() }),
    });
    const setCookies = response.headers.getSetCookie();
    for (const line of setCookies) {
      const [pair = "", ...attributes] = line.split(";");
      const name = pair.slice(0, pair.indexOf("="));
      const value = pair.slice(pair.indexOf("=") + 1);
      const expired = attributes.some((a) => /^\s*(max-age=0|expires=thu, 01 jan 1970)/i.test(a));
      if (expired || value === "") jar.delete(name);
      else jar.set(name, value);
    }
    return { response, setCookies, body: await response.text() };
  };
  let url = new URL("/auth/oidc/start", kilnBase);
  let form: Record<string, string> | undefined;
  for (let step = 0; step < 20; step += 1) {
    const { response, setCookies, body } = await send(url, form);
    form = undefined;
    if (url.origin === new URL(kilnBase).origin && url.pathname === callbackPath) {
      return { status: response.status, location: response.headers.get("location"), body, setCookies };
    }
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location !== null) {
      url = new URL(location, url);
      continue;
    }
    const action = /<form[^>]*action="([^"]+)"/.exec(body)?.[1];
    const prompt = /name="prompt" value="(\w+)"/.exec(body)?.[1];
    if (response.status !== 200 || action === undefined || prompt === undefined) {
      throw new Error(`sign-in stopped at ${url.href}: HTTP ${response.status} ${body.slice(0, 500)}`);
    }
    url = new URL(action, url);
    form = prompt === "login" ? { prompt, login, password: "any password" } : { prompt };
  }
  throw new Error("sign-in did not reach kiln's callback in 20 steps");
}
