import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  completeIdempotencyKey,
  purgeExpiredIdempotencyKeys,
  type ReserveIdempotencyKeyInput,
  releaseIdempotencyKey,
  reserveIdempotencyKey,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const T0 = new Date("2026-11-22T07:10:13.123Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

for (const dialect of DIALECTS) {
  describe(`idempotency keys [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    let keyNumber = 0;
    before(async () => {
      storage = await dialect.openFresh();
    });
    after(async () => {
      await storage?.close();
    });

    /** A request with a key no other test uses. */
    function request(overrides: Partial<ReserveIdempotencyKeyInput> = {}): ReserveIdempotencyKeyInput {
      keyNumber++;
      return {
        tenantId: "acme",
        key: `key-${keyNumber}`,
        operation: "credentials.create",
        requestHash: "hash-a",
        now: T0,
        ...overrides,
      };
    }

    async function reserved(input: ReserveIdempotencyKeyInput): Promise<string> {
      const result = await reserveIdempotencyKey(storage, input);
      assert.equal(result.kind, "reserved");
      return result.kind === "reserved" ? result.token : "";
    }

    it("reserves a new key, answers in_flight while reserved, then replays the completed receipt", async () => {
      const first = request();
      const token = await reserved(first);

      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, now: at(299) }), {
        kind: "in_flight",
        reservedUntil: "2026-11-22T07:15:13.123Z",
      });

      const body = JSON.stringify({ name: "ci-bot" });
      assert.equal(await completeIdempotencyKey(storage, { ...first, token, status: 201, body }), true);
      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, now: at(3600) }), {
        kind: "replay",
        status: 201,
        body,
      });
    });

    it("refuses the same key with a different body or operation as reused, in flight or completed", async () => {
      const first = request();
      const token = await reserved(first);
      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, requestHash: "hash-b" }), { kind: "reused" });
      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, operation: "repositories.onboard" }), {
        kind: "reused",
      });

      await completeIdempotencyKey(storage, { ...first, token, status: 200, body: "{}" });
      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, requestHash: "hash-b", now: at(86_399) }), {
        kind: "reused",
      });
    });

    it("keys are per tenant", async () => {
      const first = request();
      await reserved(first);
      await reserved({ ...first, tenantId: "globex" });
    });

    it("lets a retry take over a lapsed reservation, and fences the dead holder out", async () => {
      const first = request();
      const deadToken = await reserved(first);

      const takeover = await reserveIdempotencyKey(storage, { ...first, now: at(300) });
      assert.equal(takeover.kind, "reserved");
      assert.ok(takeover.kind === "reserved" && takeover.token !== deadToken);
      const newToken = takeover.kind === "reserved" ? takeover.token : "";

      assert.equal(
        await completeIdempotencyKey(storage, { ...first, token: deadToken, status: 500, body: "x" }),
        false,
      );
      assert.equal(await releaseIdempotencyKey(storage, { ...first, token: deadToken }), false);
      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, now: at(301) }), {
        kind: "in_flight",
        reservedUntil: "2026-11-22T07:20:13.123Z",
      });

      assert.equal(await completeIdempotencyKey(storage, { ...first, token: newToken, status: 201, body: "ok" }), true);
      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, now: at(302) }), {
        kind: "replay",
        status: 201,
        body: "ok",
      });
    });

    it("completes only once, and never with a token that was not issued", async () => {
      const first = request();
      const token = await reserved(first);
      assert.equal(
        await completeIdempotencyKey(storage, { ...first, token: "forged", status: 200, body: "no" }),
        false,
      );
      assert.equal(await completeIdempotencyKey(storage, { ...first, token, status: 200, body: "yes" }), true);
      assert.equal(await completeIdempotencyKey(storage, { ...first, token, status: 500, body: "again" }), false);
      assert.deepEqual(await reserveIdempotencyKey(storage, first), { kind: "replay", status: 200, body: "yes" });
    });

    it("replaces a receipt past retention as if the key were new", async () => {
      const first = request({ retentionSeconds: 86_400 });
      const token = await reserved(first);
      await completeIdempotencyKey(storage, { ...first, token, status: 200, body: "old" });

      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, requestHash: "hash-b", now: at(86_399) }), {
        kind: "reused",
      });
      const renewed = await reserveIdempotencyKey(storage, { ...first, requestHash: "hash-b", now: at(86_400) });
      assert.equal(renewed.kind, "reserved");
      assert.equal(await completeIdempotencyKey(storage, { ...first, token, status: 200, body: "stale" }), false);
      assert.deepEqual(await reserveIdempotencyKey(storage, { ...first, requestHash: "hash-b", now: at(86_401) }), {
        kind: "in_flight",
        reservedUntil: "2026-11-23T07:15:13.123Z",
      });
    });

    it("a released reservation can be reserved again at once; only its holder may release it", async () => {
      const first = request();
      const token = await reserved(first);
      assert.equal(await releaseIdempotencyKey(storage, { ...first, token: "someone-else" }), false);
      assert.equal(await releaseIdempotencyKey(storage, { ...first, token }), true);
      assert.equal(await releaseIdempotencyKey(storage, { ...first, token }), false);
      await reserved({ ...first, requestHash: "anything" });
    });

    it("completion inside a transaction that rolls back leaves the key in flight", async () => {
      const first = request();
      const token = await reserved(first);
      await assert.rejects(
        storage.transaction(async (trx) => {
          assert.equal(await completeIdempotencyKey(trx, { ...first, token, status: 201, body: "{}" }), true);
          throw new Error("the effect failed");
        }),
        /the effect failed/,
      );
      assert.equal((await reserveIdempotencyKey(storage, first)).kind, "in_flight");
      assert.equal(await completeIdempotencyKey(storage, { ...first, token, status: 201, body: "{}" }), true);
    });

    it("purges receipts past retention and leaves the rest", async () => {
      const old = request({ tenantId: "purge", now: at(-86_400 * 2) });
      const oldToken = await reserved(old);
      await completeIdempotencyKey(storage, { ...old, token: oldToken, status: 200, body: "{}" });
      const fresh = request({ tenantId: "purge" });
      await reserved(fresh);

      assert.equal(await purgeExpiredIdempotencyKeys(storage, T0), 1);
      const left = await storage.db
        .selectFrom("idempotency_keys")
        .select("key")
        .where("tenant_id", "=", "purge")
        .execute();
      assert.deepEqual(left, [{ key: fresh.key }]);
    });
  });
}
