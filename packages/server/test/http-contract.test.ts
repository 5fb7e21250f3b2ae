import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CATALOGUE } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { DIALECTS } from "@kiln/storage/testing";
import { buildApp } from "../src/build-app.js";
import { mintToken } from "../src/domain/identity/token-format.js";
import { appWithTenant, bearer, personWithToken, type TestApp, testApp, testBlobs } from "../src/testing/harness.js";
import { defaultHandlers } from "../src/web/handlers/default-handlers.js";
import { boundHandlerOf } from "../src/web/http/handler.js";

const validCredential = { name: "ci-bot", scopes: ["read"], expires_in_seconds: 3600 };

for (const dialect of DIALECTS) {
  describe(`HTTP contract (${dialect.name})`, () => {
    let t: TestApp;
    let owner: { tenant: string; token: string };
    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
    });
    after(() => t.close());

    const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
      t.app.inject({
        method: "POST",
        url,
        headers: { "content-type": "application/json", ...headers },
        payload: JSON.stringify(body),
      });

    it("an unknown route is a not_found Refusal", async () => {
      const res = await t.app.inject({ method: "GET", url: "/api/nothing-here" });
      assert.equal(res.statusCode, 404);
      assert.deepEqual(Object.keys(res.json()).sort(), ["code", "detail", "status"]);
      assert.equal(res.json().code, "not_found");
    });

    it("no credential, a malformed one, and a well-formed unknown one are unauthenticated", async () => {
      for (const headers of [
        {},
        bearer("kiln_cli_nonsense"),
        { authorization: "Basic abc" },
        bearer(mintToken("cli")),
      ]) {
        const res = await t.app.inject({ method: "GET", url: "/api/audit", headers });
        assert.equal(res.statusCode, 401, JSON.stringify(headers));
        assert.equal(res.json().code, "unauthenticated");
      }
    });

    it("a credential lacking the scope is refused out_of_scope naming the scope", async () => {
      const viewer = await personWithToken(t.storage, { role: "viewer" });
      const res = await post("/api/credentials", validCredential, { ...bearer(viewer.token), "idempotency-key": "k1" });
      assert.equal(res.statusCode, 403);
      assert.equal(res.json().code, "out_of_scope");
      assert.equal(res.json().scope, "admin");
    });

    it("an unknown member of a closed record is invalid_request naming the field", async () => {
      const res = await post(
        "/api/credentials",
        { ...validCredential, colour: "blue" },
        { ...bearer(owner.token), "idempotency-key": "v1" },
      );
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().code, "invalid_request");
      assert.match(res.json().detail, /body\.colour/);
    });

    it("a missing required member, an out-of-range value and a bad pattern each name their field", async () => {
      const cases: [unknown, RegExp][] = [
        [{ scopes: ["read"], expires_in_seconds: 3600 }, /body\.name is required/],
        [{ ...validCredential, expires_in_seconds: 59 }, /body\.expires_in_seconds/],
        [{ ...validCredential, expires_in_seconds: 31536001 }, /body\.expires_in_seconds/],
        [{ ...validCredential, name: "Bad_Name" }, /body\.name/],
        [{ ...validCredential, scopes: ["root"] }, /body\.scopes\[0\]/],
      ];
      let n = 0;
      for (const [body, detail] of cases) {
        const res = await post("/api/credentials", body, { ...bearer(owner.token), "idempotency-key": `bad-${n++}` });
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(res.json().code, "invalid_request");
        assert.match(res.json().detail, detail);
      }
    });

    it("a body that is not JSON is invalid_request", async () => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { "content-type": "application/json", "idempotency-key": "j1", ...bearer(owner.token) },
        payload: "{not json",
      });
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().code, "invalid_request");
    });

    it("list limits outside 1–1000, unknown query members and foreign cursors are invalid_request", async () => {
      for (const [query, field] of [
        ["limit=0", /query\.limit/],
        ["limit=1001", /query\.limit/],
        ["limit=ten", /query\.limit/],
        ["colour=red", /query\.colour/],
        ["cursor=bm90LWEtY3Vyc29y", /query\.cursor/],
      ] as const) {
        const res = await t.app.inject({
          method: "GET",
          url: `/api/credentials?${query}`,
          headers: bearer(owner.token),
        });
        assert.equal(res.statusCode, 400, query);
        assert.equal(res.json().code, "invalid_request");
        assert.match(res.json().detail, field);
      }
    });

    it("pages are keyset: stable under inserts between reads, next_cursor null on the last page", async () => {
      const tenant = await personWithToken(t.storage, { role: "owner" });
      const create = (name: string) =>
        post(
          "/api/credentials",
          { ...validCredential, name },
          { ...bearer(tenant.token), "idempotency-key": `page-${name}` },
        );
      for (const name of ["a1", "a2", "a3", "a4", "a5"]) assert.equal((await create(name)).statusCode, 200);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const query: string = cursor === null ? "limit=2" : `limit=2&cursor=${encodeURIComponent(cursor)}`;
        const res = await t.app.inject({
          method: "GET",
          url: `/api/credentials?${query}`,
          headers: bearer(tenant.token),
        });
        assert.equal(res.statusCode, 200);
        const page = res.json() as { credentials: { name: string }[]; next_cursor: string | null };
        seen.push(...page.credentials.map((c) => c.name));
        cursor = page.next_cursor;
        if (pages === 0) {
          await t.clock.advance(1000);
          assert.equal((await create("b-newer")).statusCode, 200); // lands before the first page: not seen
        }
        pages += 1;
      } while (cursor !== null);
      assert.equal(pages, 3);
      assert.deepEqual(seen, ["a5", "a4", "a3", "a2", "a1"]);
    });

    it("the predecessor routes answer 501 legacy_unsupported naming the v4 submission", async () => {
      for (const url of ["/api/jobs", "/api/v2/jobs", "/api/v3/jobs"]) {
        const res = await post(url, { repository: "acme/widget" }, bearer(owner.token));
        assert.equal(res.statusCode, 501, url);
        assert.equal(res.json().code, "legacy_unsupported");
        assert.match(res.json().detail, /POST \/api\/v4\/jobs/);
      }
    });

    it("operator operations answer operator_not_found to tenant credentials and to no credential", async () => {
      for (const op of CATALOGUE.filter(
        (o) => o.security.kind === "operator" || o.security.kind === "operator-bootstrap",
      )) {
        const url = op.path.replace(/\{[a-z_]+\}/g, "x1");
        for (const headers of [{}, bearer(owner.token)]) {
          const res = await t.app.inject({ method: op.method, url, headers });
          assert.equal(res.statusCode, 404, `${op.id} ${JSON.stringify(headers)}`);
          assert.equal(res.json().code, "operator_not_found", op.id);
        }
      }
    });
  });
}

describe("failures that were not foreseen", () => {
  it("are answered without stack traces, SQL or paths", async () => {
    const t = await testApp(await (DIALECTS[0]?.openFresh() ?? Promise.reject(new Error("no dialect"))));
    const leaky = buildApp(
      {
        storage: t.storage,
        clock: ManualClock.withRealTimers(),
        version: "test",
        publicOrigin: "http://kiln.test",
        blobs: testBlobs(),
        checkResponses: true,
      },
      {
        ...defaultHandlers,
        "audit.list": async () => {
          throw new Error("SELECT secret FROM audit_entries at /srv/kiln/storage.ts:12");
        },
      },
    );
    const owner = await personWithToken(t.storage, { role: "owner" });
    const res = await leaky.inject({ method: "GET", url: "/api/audit", headers: bearer(owner.token) });
    assert.equal(res.statusCode, 503);
    assert.equal(res.json().code, "unavailable");
    assert.doesNotMatch(res.body, /SELECT|\/srv|storage\.ts|at /);
    await leaky.close();
    await t.close();
  });
});

describe("every operation is served", () => {
  it("every catalogued operation has a handler", () => {
    const missing = CATALOGUE.filter((op) => boundHandlerOf(defaultHandlers, op.id) === undefined).map((op) => op.id);
    assert.deepEqual(missing, [], `operations answering not_implemented: ${missing.join(", ")}`);
  });

  it("an operation without a handler answers 501 not_implemented naming itself, after security and validation", async () => {
    const storage = await (DIALECTS[0]?.openFresh() ?? Promise.reject(new Error("no dialect")));
    const clock = ManualClock.withRealTimers();
    const { "jobs.list": _withheld, ...withoutJobsList } = defaultHandlers;
    const app = buildApp(
      { storage, clock, version: "test", publicOrigin: "http://kiln.test", blobs: testBlobs(), checkResponses: true },
      withoutJobsList,
    );
    await app.ready();
    try {
      const owner = await personWithToken(storage, { role: "owner" });
      const anonymous = await app.inject({ method: "GET", url: "/api/jobs" });
      assert.equal(anonymous.statusCode, 401, "security answers before the missing handler");
      const res = await app.inject({ method: "GET", url: "/api/jobs", headers: bearer(owner.token) });
      assert.equal(res.statusCode, 501, res.body);
      assert.equal(res.json().code, "not_implemented");
      assert.match(res.json().detail, /jobs\.list/);
    } finally {
      await app.close();
      await storage.close();
    }
  });
});
