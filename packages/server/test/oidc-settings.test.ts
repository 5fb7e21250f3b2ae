import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { oidcFromEnv } from "../src/config.js";
import { membershipsFromGroups } from "../src/web/auth/oidc-memberships.js";

describe("OpenID Connect settings and the groups rule", () => {
  it("maps kiln:<tenant>:<role> values to memberships, the most privileged role per tenant", () => {
    assert.deepEqual(
      membershipsFromGroups([
        "engineering",
        "kiln:beta:viewer",
        "kiln:acme:member",
        "kiln:acme:admin",
        "kiln:acme:superuser",
        "kiln::owner",
        42,
      ]),
      [
        { tenantId: "acme", role: "admin", group: "kiln:acme:admin" },
        { tenantId: "beta", role: "viewer", group: "kiln:beta:viewer" },
      ],
    );
    assert.deepEqual(membershipsFromGroups("kiln:solo:owner"), [
      { tenantId: "solo", role: "owner", group: "kiln:solo:owner" },
    ]);
    assert.deepEqual(membershipsFromGroups(undefined), []);
    assert.deepEqual(membershipsFromGroups({ groups: ["kiln:acme:owner"] }), []);
  });

  it("reads the provider from the environment: all three or none, https or loopback http", () => {
    assert.equal(oidcFromEnv({}), undefined);
    assert.deepEqual(
      oidcFromEnv({
        KILN_OIDC_ISSUER: "https://idp.example/realms/acme",
        KILN_OIDC_CLIENT_ID: "kiln",
        KILN_OIDC_CLIENT_SECRET: "s3cret",
      }),
      {
        issuer: "https://idp.example/realms/acme",
        clientId: "kiln",
        clientSecret: "s3cret",
        groupsClaim: "groups",
        providerVerifiesEmails: false,
      },
    );
    assert.equal(
      oidcFromEnv({
        KILN_OIDC_ISSUER: "http://127.0.0.1:9000",
        KILN_OIDC_CLIENT_ID: "kiln",
        KILN_OIDC_CLIENT_SECRET: "s",
        KILN_OIDC_GROUPS_CLAIM: "roles",
      })?.groupsClaim,
      "roles",
    );
    const provider = {
      KILN_OIDC_ISSUER: "https://idp.example",
      KILN_OIDC_CLIENT_ID: "k",
      KILN_OIDC_CLIENT_SECRET: "s",
    };
    assert.equal(oidcFromEnv({ ...provider, KILN_OIDC_PROVIDER_VERIFIES_EMAILS: "on" })?.providerVerifiesEmails, true);
    assert.throws(() => oidcFromEnv({ ...provider, KILN_OIDC_PROVIDER_VERIFIES_EMAILS: "yes" }), /on or off/);
    assert.throws(() => oidcFromEnv({ KILN_OIDC_ISSUER: "https://idp.example" }), /needs all of/);
    assert.throws(
      () =>
        oidcFromEnv({ KILN_OIDC_ISSUER: "http://idp.example", KILN_OIDC_CLIENT_ID: "k", KILN_OIDC_CLIENT_SECRET: "s" }),
      /https/,
    );
  });
});
