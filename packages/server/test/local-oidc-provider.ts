import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";
import type { Page } from "playwright-core";

/** A person the local provider knows, by login name (the dev login form accepts any password). */
export interface ProviderAccount {
  readonly email: string;
  readonly name: string;
  readonly groups: readonly string[];
}

export interface LocalOidcProvider {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
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
          email_verified: true,
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
