import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { reserveIdempotencyKey } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { SHOWN_ONCE_NOTICE } from "../src/web/http/perform-keyed.js";
import { requestHashOf } from "../src/web/http/request-hash.js";

const body = (name: string) => ({ name, scopes: ["read", "submit"], expires_in_seconds: 3600 });

for (const dialect of DIALECTS) {
  describe(`idempotency of keyed mutations (${dialect.name})`, () => {
    let t: TestApp;
    let owner: { tenant: string; token: string };
    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
    });
    after(() => t.close());

    const create = (payload: unknown, headers: Record<string, string | string[]>, token = owner.token) =>
      t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { "content-type": "application/json", ...bearer(token), ...headers },
        payload: JSON.stringify(payload),
      });
    const count = async (tenant = owner.tenant) =>
      (await t.storage.db.selectFrom("agent_credentials").select("name").where("tenant_id", "=", tenant).execute())
        .length;

    it("no idempotency-key, or more than one, is idempotency_key_required", async () => {
      const none = await create(body("no-key"), {});
      assert.equal(none.statusCode, 400);
      assert.equal(none.json().code, "idempotency_key_required");
      const two = await create(body("two-keys"), { "idempotency-key": ["a", "b"] });
      assert.equal(two.statusCode, 400);
      assert.equal(two.json().code, "idempotency_key_required");
      assert.equal(await count(), 0);
    });

    it("a repeat with the same request replays the receipt; no second effect", async () => {
      const first = await create(body("replayed"), { "idempotency-key": "rep-1" });
      assert.equal(first.statusCode, 200);
      const again = await create(body("replayed"), { "idempotency-key": "rep-1" });
      assert.equal(again.statusCode, 200);
      assert.equal(again.headers["idempotent-replayed"], "true");
      // The same receipt, except the credential value: it is shown once and never stored.
      assert.deepEqual(again.json().view, first.json().view);
      assert.match(first.json().credential, /^kiln_agent_/);
      assert.equal(again.json().credential, SHOWN_ONCE_NOTICE);
      assert.equal(await count(), 1);
    });

    it("a refusal is the key's answer too, replayed to a repeat", async () => {
      const first = await create(body("replayed"), { "idempotency-key": "rep-2" }); // name taken → conflict
      assert.equal(first.statusCode, 409);
      assert.equal(first.json().code, "conflict");
      const again = await create(body("replayed"), { "idempotency-key": "rep-2" });
      assert.equal(again.body, first.body);
    });

    it("a changed body under the same key is idempotency_key_reused", async () => {
      const res = await create(body("something-else"), { "idempotency-key": "rep-1" });
      assert.equal(res.statusCode, 409);
      assert.equal(res.json().code, "idempotency_key_reused");
    });

    it("keys are scoped per tenant: another tenant's identical key and body get their own effect", async () => {
      const other = await personWithToken(t.storage, { role: "owner" });
      const res = await create(body("replayed"), { "idempotency-key": "rep-1" }, other.token);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers["idempotent-replayed"], undefined);
      assert.notEqual(res.json().credential, undefined);
      assert.equal(await count(other.tenant), 1);
    });

    it("while the first request is in flight a repeat is idempotency_key_in_flight; after five minutes it can take over", async () => {
      const payload = body("in-flight");
      const requestHash = requestHashOf("credentials.create", { params: {}, query: {}, body: payload });
      const held = await reserveIdempotencyKey(t.storage, {
        tenantId: owner.tenant,
        key: "flight-1",
        operation: "credentials.create",
        requestHash,
        now: t.clock.now(),
      });
      assert.equal(held.kind, "reserved");
      const res = await create(payload, { "idempotency-key": "flight-1" });
      assert.equal(res.statusCode, 409);
      assert.equal(res.json().code, "idempotency_key_in_flight");
      await t.clock.advance(301_000);
      const later = await create(payload, { "idempotency-key": "flight-1" });
      assert.equal(later.statusCode, 200, later.body);
    });

    it("a receipt is kept 24 hours; after that the key is free again", async () => {
      const first = await create(body("day-old"), { "idempotency-key": "day-1" });
      assert.equal(first.statusCode, 200);
      await t.clock.advance(23 * 3600 * 1000);
      assert.equal(
        (await create(body("other-body"), { "idempotency-key": "day-1" })).json().code,
        "idempotency_key_reused",
      );
      await t.clock.advance(3601 * 1000);
      const fresh = await create(body("day-new"), { "idempotency-key": "day-1" });
      assert.equal(fresh.statusCode, 200, fresh.body);
      assert.equal(fresh.json().view.name, "day-new");
    });

    it("50 concurrent requests with one key: exactly one effect, every other answer a replay or in flight", async () => {
      const results = await Promise.all(
        Array.from({ length: 50 }, () => create(body("raced"), { "idempotency-key": "race-1" })),
      );
      const fresh = results.filter((r) => r.statusCode === 200 && r.headers["idempotent-replayed"] === undefined);
      const replays = results.filter((r) => r.statusCode === 200 && r.headers["idempotent-replayed"] === "true");
      const inFlight = results.filter((r) => r.statusCode === 409 && r.json().code === "idempotency_key_in_flight");
      assert.equal(fresh.length, 1);
      assert.equal(fresh.length + replays.length + inFlight.length, 50);
      for (const r of replays) assert.deepEqual(r.json().view, fresh[0]?.json().view);
      const names = await t.storage.db
        .selectFrom("agent_credentials")
        .select("name")
        .where("name", "=", "raced")
        .execute();
      assert.equal(names.length, 1);
    });
  });
}

describe("the request hash of a keyed mutation", () => {
  it("is the SHA-256 of the canonical JSON: object keys sorted at every depth, arrays in order", () => {
    const request = { z: [3, 4], a: [1, "b", null, { d: 1, c: [true, { f: 0, e: "x" }] }], m: { y: 1, b: 2 } };
    const expected = '{"a":[1,"b",null,{"c":[true,{"e":"x","f":0}],"d":1}],"m":{"b":2,"y":1},"z":[3,4]}';
    const sha256 = createHash("sha256").update("op").update("\n").update(expected).digest("hex");
    assert.equal(requestHashOf("op", request), sha256);
  });

  it("hashes an inline source's byte arrays by value (the same bytes, the same hash; one byte more, another)", () => {
    const bytes = Array.from({ length: 200_000 }, (_, i) => i % 256);
    const body = (b: number[]) => ({ body: { workspace: { source: { files: [{ path: "a", bytes: b }] } } } });
    assert.equal(requestHashOf("jobs.submit", body(bytes)), requestHashOf("jobs.submit", body([...bytes])));
    assert.notEqual(requestHashOf("jobs.submit", body(bytes)), requestHashOf("jobs.submit", body([...bytes, 0])));
  });
});
