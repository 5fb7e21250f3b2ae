import * as client from "openid-client";

/** The identity provider kiln signs people in with (KILN_OIDC_* in config.ts). */
export interface OidcSettings {
  /** The issuer URL; its `/.well-known/openid-configuration` is read at the first sign-in. */
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The claim carrying the person's groups (default `groups`); see oidc-memberships.ts for the rule. */
  readonly groupsClaim: string;
  /**
   * KILN_OIDC_PROVIDER_VERIFIES_EMAILS: the operator says this provider releases only addresses it
   * verified, so an answer without `email_verified` is trusted. Otherwise only `email_verified:
   * true` is: an address a person merely typed must not sign them in as whoever owns it.
   */
  readonly providerVerifiesEmails: boolean;
}

/** Whether the provider's answer vouches for its `email` (see providerVerifiesEmails). */
export function emailVouchedFor(emailVerified: unknown, settings: OidcSettings): boolean {
  // Some providers send the claim as a string.
  if (emailVerified === true || emailVerified === "true") return true;
  return emailVerified === undefined && settings.providerVerifiesEmails;
}

/** Plain http is accepted only for an issuer on the loopback interface (a local or test provider). */
function isLoopback(url: URL): boolean {
  return url.hostname === "127.0.0.1" || url.hostname === "localhost" || url.hostname === "[::1]";
}

/**
 * One discovered client configuration per settings object, read at first use and kept;
 * a failed discovery is forgotten so the next sign-in tries again.
 */
const discovered = new WeakMap<OidcSettings, Promise<client.Configuration>>();

export function oidcConfiguration(settings: OidcSettings): Promise<client.Configuration> {
  let found = discovered.get(settings);
  if (found === undefined) {
    const issuer = new URL(settings.issuer);
    const insecure = issuer.protocol === "http:" && isLoopback(issuer);
    found = client.discovery(
      issuer,
      settings.clientId,
      undefined,
      client.ClientSecretBasic(settings.clientSecret),
      insecure ? { execute: [client.allowInsecureRequests] } : undefined,
    );
    discovered.set(settings, found);
    found.catch(() => discovered.delete(settings));
  }
  return found;
}

/** What kiln keeps in the browser between the redirect to the IdP and the callback. */
export interface OidcPending {
  readonly state: string;
  readonly nonce: string;
  readonly verifier: string;
  /** Where to go after signing in (an own path). */
  readonly next: string;
}

/** The authorization request (code flow, PKCE S256, state and nonce) and what the callback must check. */
export async function startAuthorization(
  settings: OidcSettings,
  redirectUri: string,
  next: string,
): Promise<{ url: URL; pending: OidcPending }> {
  const config = await oidcConfiguration(settings);
  const verifier = client.randomPKCECodeVerifier();
  const pending: OidcPending = { state: client.randomState(), nonce: client.randomNonce(), verifier, next };
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: "openid email profile",
    response_type: "code",
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state: pending.state,
    nonce: pending.nonce,
  });
  return { url, pending };
}

/**
 * Redeems the callback: exchanges the code (with the PKCE verifier, checking state, nonce and
 * the ID token's signature, issuer, audience and expiry) and returns the ID token's claims,
 * completed from the userinfo endpoint (many IdPs put groups and email only there).
 */
export async function finishAuthorization(
  settings: OidcSettings,
  callbackUrl: URL,
  pending: OidcPending,
): Promise<Record<string, unknown>> {
  const config = await oidcConfiguration(settings);
  const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
    pkceCodeVerifier: pending.verifier,
    expectedState: pending.state,
    expectedNonce: pending.nonce,
    idTokenExpected: true,
  });
  const claims = tokens.claims();
  if (claims === undefined) throw new Error("the identity provider returned no ID token");
  if (config.serverMetadata().userinfo_endpoint === undefined) return { ...claims };
  // The userinfo response must name the ID token's subject; the ID token's own claims win.
  const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
  return { ...info, ...claims };
}
