import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { openStorage, type Storage } from "@kiln/storage";
import { createPostgresTestDatabase, DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { type ServerProcess, startSharedDatabaseServer, stopServerProcess } from "./server-process.js";

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const credentialRequest = (name: string, requestsPerMinute: number) =>
  JSON.stringify({ name, scopes: ["read"], expires_in_seconds: 3600, requests_per_minute: requestsPerMinute });

for (const dialect of DIALECTS) {
  describe(`per-credential rate limit (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; token: string };
    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
    });
    after(() => t.close());

    const mint = async (name: string, requestsPerMinute: number): Promise<string> => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/credentials",
        headers: { "content-type": "application/json", "idempotency-key": `mint-${name}`, ...bearer(owner.token) },
        payload: credentialRequest(name, requestsPerMinute),
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().view.requests_per_minute, requestsPerMinute);
      return res.json().credential as string;
    };
    const identity = (token: string) => t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(token) });

    it("five a minute: five answers, then rate_limited naming when the first leaves the window, with Retry-After", async () => {
      const limited = await mint("five-a-minute", 5);
      const other = await mint("bystander", 5);
      const start = t.clock.now();
      // Counted in whole seconds: the second of the first request leaves every 60 s window ending
      // 61 s after it began.
      const boundary = new Date(Math.floor(start.getTime() / 1000) * 1000 + 61000).toISOString();
      for (let i = 1; i <= 5; i++) {
        const res = await identity(limited);
        assert.equal(res.statusCode, 200, `request ${i}: ${res.body}`);
      }
      const sixth = await identity(limited);
      assert.equal(sixth.statusCode, 429, sixth.body);
      assert.equal(sixth.json().code, "rate_limited");
      assert.match(sixth.json().reset_at, RFC3339);
      assert.equal(sixth.json().reset_at, boundary);
      assert.equal(sixth.headers["retry-after"], "61");
      assert.equal(sixth.json().retry_after_seconds, 61);

      // The limit is the credential's own: another credential and the person are unaffected.
      assert.equal((await identity(other)).statusCode, 200);
      assert.equal((await identity(owner.token)).statusCode, 200);

      // Still limited until reset_at, with Retry-After counting down to it.
      await t.clock.advance(45_000);
      const later = await identity(limited);
      assert.equal(later.statusCode, 429, later.body);
      assert.equal(later.json().reset_at, boundary);
      assert.equal(later.headers["retry-after"], "16");

      // At reset_at the first five have left the window.
      await t.clock.advance(16_000);
      assert.ok(t.clock.now().toISOString() >= boundary);
      for (let i = 1; i <= 5; i++) {
        const res = await identity(limited);
        assert.equal(res.statusCode, 200, `after reset, request ${i}: ${res.body}`);
      }
      assert.equal((await identity(limited)).statusCode, 429);
    });

    it("the limit holds over every 60 s, not per calendar minute: twice the limit across a minute's turn is refused", async () => {
      const limited = await mint("across-the-turn", 5);
      // Just before a minute turns (the app's clock is injected; nothing waits).
      const now = t.clock.now().getTime();
      await t.clock.advance(60000 - (now % 60000) - 500);
      for (let i = 1; i <= 5; i++) assert.equal((await identity(limited)).statusCode, 200, `request ${i}`);
      await t.clock.advance(1000); // half a second into the next minute
      assert.equal(t.clock.now().getTime() % 60000, 500);
      const refused: string[] = [];
      for (let i = 1; i <= 5; i++) {
        const res = await identity(limited);
        assert.equal(res.statusCode, 429, `request ${5 + i} across the turn: ${res.body}`);
        refused.push(res.json().reset_at);
      }
      // Refused requests are not counted: once the first five leave the window, five more pass.
      const resetAt = new Date(refused[0] ?? "");
      assert.ok(refused.every((r) => r === refused[0]));
      await t.clock.advance(resetAt.getTime() - t.clock.now().getTime() - 1000);
      assert.equal((await identity(limited)).statusCode, 429, "a second before reset_at");
      await t.clock.advance(1000);
      for (let i = 1; i <= 5; i++) assert.equal((await identity(limited)).statusCode, 200, `after reset, ${i}`);
      assert.equal((await identity(limited)).statusCode, 429);

      // Spread out, the limit is the limit: one every 12 s goes on being admitted.
      const steady = await mint("steady", 5);
      for (let i = 1; i <= 20; i++) {
        assert.equal((await identity(steady)).statusCode, 200, `steady request ${i}`);
        await t.clock.advance(12_250);
      }
    });
  });
}

const postgresSkip = DIALECTS.find((d) => d.name === "postgres")?.skip ?? false;

describe("per-credential rate limit across two server processes sharing PostgreSQL", { skip: postgresSkip }, () => {
  let db: { url: string; drop(): Promise<void> };
  let storage: Storage;
  const servers: ServerProcess[] = [];

  before(async () => {
    db = await createPostgresTestDatabase();
    storage = await openStorage({ databaseUrl: db.url, dataDir: "/nonexistent" });
    servers.push(await startSharedDatabaseServer(db.url));
    servers.push(await startSharedDatabaseServer(db.url));
  });
  after(async () => {
    for (const s of servers) await stopServerProcess(s);
    await storage.close();
    await db.drop();
  });

  it("requests alternating between the processes share one limit: the sixth in the minute is rate_limited", async () => {
    const owner = await personWithToken(storage, { role: "owner" });
    const minted = await fetch(`${servers[0]?.url}/api/credentials`, {
      method: "POST",
      headers: { ...bearer(owner.token), "content-type": "application/json", "idempotency-key": "mint-shared" },
      body: credentialRequest("shared-limit", 5),
    });
    assert.equal(minted.status, 200, await minted.clone().text());
    const credential = ((await minted.json()) as { credential: string }).credential;

    const firstSecond = Math.floor(Date.now() / 1000) * 1000; // at or before the first request's second

    const answers: { server: number; status: number; retryAfter: string | null; body: Record<string, unknown> }[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${servers[i % 2]?.url}/api/identity`, { headers: bearer(credential) });
      answers.push({
        server: i % 2,
        status: res.status,
        retryAfter: res.headers.get("retry-after"),
        body: (await res.json()) as Record<string, unknown>,
      });
    }
    process.stdout.write(
      `# two-process rate limit: ${answers.map((a) => `${a.status}@server${a.server}`).join(", ")}\n`,
    );

    for (const a of answers.slice(0, 5)) assert.equal(a.status, 200, JSON.stringify(a));
    const sixth = answers[5];
    assert.ok(sixth !== undefined);
    assert.equal(sixth.status, 429, JSON.stringify(sixth));
    assert.equal(sixth.body.code, "rate_limited");
    assert.match(String(sixth.body.reset_at), RFC3339);
    // The first request's second leaves the window 61 s after it began.
    const lastSecond = Math.floor(Date.now() / 1000) * 1000; // at or after it
    const resetAt = Date.parse(String(sixth.body.reset_at));
    assert.ok(
      resetAt >= firstSecond + 61000 && resetAt <= lastSecond + 61000 && resetAt % 1000 === 0,
      `reset_at ${String(sixth.body.reset_at)}`,
    );
    assert.match(sixth.retryAfter ?? "", /^\d+$/);
    const retryAfter = Number(sixth.retryAfter);
    assert.ok(retryAfter >= 1 && retryAfter <= 61, `Retry-After ${retryAfter}`);
    assert.equal(sixth.body.retry_after_seconds, retryAfter);
  });
});
