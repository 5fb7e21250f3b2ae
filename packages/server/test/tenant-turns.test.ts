import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setImmediate as nextTurn } from "node:timers/promises";
import { DIALECTS } from "@kiln/storage/testing";
import { bearer, personWithToken, testApp } from "../src/testing/harness.js";
import { TenantTurns } from "../src/web/http/tenant-turns.js";

/** Lets every microtask queued so far run (a request started "at once" runs in them). */
const settle = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("a tenant's requests start one a turn of the event loop (tenant-turns.ts)", () => {
  it("a flooding tenant's held requests start in later turns, in order, while another tenant's start at once", async () => {
    const turns = new TenantTurns();
    const started: string[] = [];
    const start = async (name: string, tenant: string) => {
      await turns.take(tenant);
      started.push(name);
    };
    const requests = [start("a1", "a"), start("a2", "a"), start("a3", "a"), start("b1", "b")];
    await settle();
    assert.deepEqual(started, ["a1", "b1"], "in the first turn, one request of each tenant");
    await nextTurn();
    assert.deepEqual(started, ["a1", "b1", "a2"], "the next turn starts a's next one");
    // Another tenant arriving now is not queued behind a's last held request.
    requests.push(start("b2", "b"));
    await settle();
    assert.deepEqual(started, ["a1", "b1", "a2", "b2"]);
    await nextTurn();
    assert.deepEqual(started, ["a1", "b1", "a2", "b2", "a3"]);
    await Promise.all(requests);
    await nextTurn();
    await nextTurn();
    assert.equal(turns.tenants, 0, "nothing is remembered once every tenant's turns are over");
  });

  it("a lone tenant's request is never held", async () => {
    const turns = new TenantTurns();
    assert.equal(turns.take("a"), null);
    await nextTurn();
    assert.equal(turns.take("a"), null, "a new turn: the next request starts at once");
  });
});

describe("the catalogue's routes take the tenant's turn (SQLite, whose reads do not yield)", () => {
  const sqlite = DIALECTS.find((d) => d.name === "sqlite");
  it("another tenant's request is answered before a flooding tenant's held ones", async (t) => {
    if (sqlite === undefined) return t.skip("no sqlite dialect");
    const app = await testApp(await sqlite.openFresh());
    t.after(() => app.close());
    const flooding = await personWithToken(app.storage, { role: "owner" });
    const quiet = await personWithToken(app.storage, { role: "owner" });
    const answered: string[] = [];
    const ask = (name: string, token: string) =>
      app.app.inject({ method: "GET", url: "/api/identity", headers: bearer(token) }).then((res) => {
        assert.equal(res.statusCode, 200, res.body);
        answered.push(name);
      });
    await Promise.all([
      ask("flood 1", flooding.token),
      ask("flood 2", flooding.token),
      ask("flood 3", flooding.token),
      ask("quiet", quiet.token),
    ]);
    assert.deepEqual(answered, ["flood 1", "quiet", "flood 2", "flood 3"]);
  });
});
