import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";

const validCredential = { name: "ci-bot", scopes: ["read"], expires_in_seconds: 3600 };

for (const dialect of DIALECTS) {
  describe(`JSON bodies are validated, never converted; path and query values are (${dialect.name})`, () => {
    let t: TestApp;
    let owner: { tenant: string; token: string };
    let keys = 0;
    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner" }));
    });
    after(() => t.close());

    const post = (url: string, body: unknown) =>
      t.app.inject({
        method: "POST",
        url,
        headers: { ...bearer(owner.token), "content-type": "application/json", "idempotency-key": `k${++keys}` },
        payload: JSON.stringify(body),
      });

    it("a member of the wrong JSON type is invalid_request naming the member", async () => {
      const cases: [string, unknown, RegExp][] = [
        ["/api/credentials", { ...validCredential, scopes: "read" }, /^body\.scopes /],
        ["/api/credentials", { ...validCredential, expires_in_seconds: "3600" }, /^body\.expires_in_seconds /],
        ["/api/credentials", { ...validCredential, requests_per_minute: "60" }, /^body\.requests_per_minute /],
        ["/api/credentials", { ...validCredential, name: 7 }, /^body\.name /],
        ["/api/v4/jobs", { ...inlineSubmission("acme/widget"), schema_version: "1" }, /^body\.schema_version /],
      ];
      for (const [url, body, detail] of cases) {
        const res = await post(url, body);
        assert.equal(res.statusCode, 400, `${JSON.stringify(body).slice(0, 120)}: ${res.body}`);
        assert.equal(res.json().code, "invalid_request");
        assert.match(res.json().detail, detail);
      }
    });

    it("the same bodies with the right types are accepted", async () => {
      const credential = await post("/api/credentials", validCredential);
      assert.equal(credential.statusCode, 200, credential.body);
      assert.deepEqual(credential.json().view.scopes, ["read"]);
      const job = await post("/api/v4/jobs", inlineSubmission("acme/widget"));
      assert.equal(job.statusCode, 200, job.body);
    });

    it("a query integer arrives as text and is converted: ?limit=1 pages by one", async () => {
      await post("/api/credentials", { ...validCredential, name: "ci-bot-2" });
      const res = await t.app.inject({ method: "GET", url: "/api/credentials?limit=1", headers: bearer(owner.token) });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().credentials.length, 1);
      assert.notEqual(res.json().next_cursor, null);
    });
  });
}
