/**
 * OpenID Connect sign-in trusts an email address only as far as the provider vouches for it: a
 * real OpenID provider running locally (oidc-provider) releases `email_verified` true, false or
 * not at all, and kiln's callback signs the person in or refuses.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import { createTenant, findPersonByEmail, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/build-app.js";
import { listenBeforeTheApp } from "../src/testing/app-origin.js";
import { testBlobs } from "../src/testing/harness.js";
import {
  type LocalOidcProvider,
  type ProviderAccount,
  signInOverHttp,
  startLocalOidcProvider,
} from "../src/testing/local-oidc-provider.js";
import { SESSION_COOKIE } from "../src/web/auth/session-cookies.js";
import { OIDC_CALLBACK_PATH } from "../src/web/pages/oidc-sign-in.js";

const TENANT = `acme${process.pid}`;
const ACCOUNTS: Record<string, ProviderAccount> = {
  verified: { email: "vera@acme.example", name: "Vera", groups: [`kiln:${TENANT}:member`], emailVerified: true },
  unsaid: { email: "ulla@acme.example", name: "Ulla", groups: [`kiln:${TENANT}:member`], emailVerified: "absent" },
  unverified: { email: "ugo@acme.example", name: "Ugo", groups: [`kiln:${TENANT}:member`], emailVerified: false },
};

interface KilnWithProvider {
  readonly base: string;
  readonly storage: Storage;
  close(): Promise<void>;
}

/** kiln (SQLite) listening on loopback, signing people in at its own local provider. */
async function startKiln(providerVerifiesEmails: boolean): Promise<KilnWithProvider> {
  const storage = await openSqliteForTest();
  const clock = ManualClock.withRealTimers(new Date());
  await createTenant(storage, { id: TENANT, displayName: "Acme" }, clock.now());
  // The callback URL must be known before the app is built: listen first, route to the app once ready.
  const origin = await listenBeforeTheApp();
  const base = origin.base;
  const provider: LocalOidcProvider = await startLocalOidcProvider(`${base}${OIDC_CALLBACK_PATH}`, ACCOUNTS);
  const app: FastifyInstance = buildApp({
    storage,
    clock,
    blobs: testBlobs(),
    version: "test",
    publicOrigin: base,
    checkResponses: true,
    oidc: provider.settings(providerVerifiesEmails),
  });
  await origin.serve(app);
  return {
    base,
    storage,
    close: async () => {
      await origin.close();
      await provider.close();
      await app.close();
      await storage.close();
    },
  };
}

const signedIn = (answer: { status: number; location: string | null; setCookies: readonly string[] }) =>
  answer.status === 303 && answer.location === "/" && answer.setCookies.some((c) => c.startsWith(`${SESSION_COOKIE}=`));

describe("OpenID Connect sign-in and email_verified", () => {
  let strict: KilnWithProvider;
  let trusting: KilnWithProvider;
  before(async () => {
    strict = await startKiln(false);
    trusting = await startKiln(true);
  });
  after(async () => {
    await strict?.close();
    await trusting?.close();
  });

  it("by default only email_verified: true signs in; an absent claim is unverified", async () => {
    const verified = await signInOverHttp(strict.base, OIDC_CALLBACK_PATH, "verified");
    assert.ok(signedIn(verified), `${verified.status} ${verified.location} ${verified.body}`);
    for (const login of ["unsaid", "unverified"]) {
      const refused = await signInOverHttp(strict.base, OIDC_CALLBACK_PATH, login);
      assert.equal(refused.status, 403, `${login}: ${refused.body}`);
      assert.match(refused.body, /did not vouch for an email address/);
      assert.ok(!refused.setCookies.some((c) => c.startsWith(`${SESSION_COOKIE}=`)), `${login} got a session`);
      assert.equal(await findPersonByEmail(strict.storage, ACCOUNTS[login]?.email ?? ""), undefined);
    }
  });

  it("KILN_OIDC_PROVIDER_VERIFIES_EMAILS trusts an absent claim, never email_verified: false", async () => {
    const unsaid = await signInOverHttp(trusting.base, OIDC_CALLBACK_PATH, "unsaid");
    assert.ok(signedIn(unsaid), `${unsaid.status} ${unsaid.location} ${unsaid.body}`);
    assert.ok(await findPersonByEmail(trusting.storage, "ulla@acme.example"));
    const unverified = await signInOverHttp(trusting.base, OIDC_CALLBACK_PATH, "unverified");
    assert.equal(unverified.status, 403, unverified.body);
    assert.equal(await findPersonByEmail(trusting.storage, "ugo@acme.example"), undefined);
  });
});
