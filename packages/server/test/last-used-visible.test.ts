import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type LoopFailure, silentLogger, systemClock } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { DIALECTS } from "@kiln/storage/testing";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { LastUsedRecorder } from "../src/web/auth/last-used-recorder.js";

for (const dialect of DIALECTS) {
  describe(`last_used_at shows this process's uses before they are written (${dialect.name})`, () => {
    let t: TestApp;
    let owner: { tenant: string; userId: string; token: string };
    let recorder: LastUsedRecorder;
    before(async () => {
      const storage = await dialect.openFresh();
      recorder = new LastUsedRecorder(storage, { clock: systemClock, log: silentLogger });
      t = await testApp(storage, { lastUsed: recorder });
      owner = await personWithToken(t.storage, { role: "owner" });
    });
    after(() => t.close());

    const get = (url: string, token: string) => t.app.inject({ method: "GET", url, headers: bearer(token) });
    const credentialLastUsed = async (name: string) => {
      const res = await get("/api/credentials", owner.token);
      assert.equal(res.statusCode, 200, res.body);
      return (res.json().credentials as { name: string; last_used_at: string | null }[]).find((c) => c.name === name)
        ?.last_used_at;
    };
    const storedCredentialLastUsed = async (name: string) =>
      (
        await t.storage.db
          .selectFrom("agent_credentials")
          .select("last_used_at")
          .where("name", "=", name)
          .where("tenant_id", "=", owner.tenant)
          .executeTakeFirstOrThrow()
      ).last_used_at;

    it("an agent credential used a moment ago is listed with that use, then with a later one", async () => {
      const created = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { ...bearer(owner.token), "content-type": "application/json", "idempotency-key": "mint" },
        payload: JSON.stringify({ name: "ci-bot", scopes: ["read"], expires_in_seconds: 3600 }),
      });
      assert.equal(created.statusCode, 200, created.body);
      const agent = created.json().credential as string;
      assert.equal(await credentialLastUsed("ci-bot"), null, "never used");

      await t.clock.advance(5000);
      const usedAt = t.clock.now().toISOString();
      assert.equal((await get("/api/identity", agent)).statusCode, 200);
      await t.clock.advance(1000);
      assert.equal(await storedCredentialLastUsed("ci-bot"), null, "not written yet");
      assert.equal(await credentialLastUsed("ci-bot"), usedAt);

      await recorder.flush();
      assert.equal(await storedCredentialLastUsed("ci-bot"), usedAt);
      await t.clock.advance(10_000);
      const laterAt = t.clock.now().toISOString();
      assert.equal((await get("/api/identity", agent)).statusCode, 200);
      assert.equal(await credentialLastUsed("ci-bot"), laterAt, "the pending use is later than the stored one");
    });

    it("a CLI token's own listing shows its use at once", async () => {
      await t.clock.advance(60_000);
      const res = await get("/api/cli/tokens", owner.token);
      assert.equal(res.statusCode, 200, res.body);
      const tokens = res.json().tokens as { principal: string; last_used_at: string | null }[];
      assert.deepEqual(
        tokens.map((tok) => tok.last_used_at),
        [t.clock.now().toISOString()],
      );
    });

    it("a write that fails is reported as the loop's failure, and its uses stay pending for the next batch", async () => {
      const broken = await dialect.openFresh();
      await broken.close();
      const clock = new ManualClock(new Date("2026-11-22T08:00:00.000Z"));
      const failures: LoopFailure[] = [];
      const failing = new LastUsedRecorder(broken, {
        clock,
        log: silentLogger,
        flushSeconds: 30,
        onFailure: (failure) => failures.push(failure),
      });
      const at = new Date("2026-11-22T08:00:05.000Z");
      failing.note(
        {
          kind: "person",
          principal: "u1",
          tenantId: "t1",
          userId: "u1",
          displayName: "U",
          role: "owner",
          scopes: [],
          via: { kind: "cli_token", tokenId: "tok-1" },
          requestsPerMinute: null,
        },
        at,
      );
      await clock.advance(30_000);
      assert.equal(failures.length, 1);
      assert.equal(failures[0]?.loop, "last-used recorder");
      assert.equal(failing.pendingCliTokenUse("tok-1"), at.toISOString(), "the use was not dropped");
      await assert.rejects(failing.close());
    });
  });
}
