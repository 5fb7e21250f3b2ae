import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { openStorage, type Storage } from "@kiln/storage";
import { createPostgresTestDatabase } from "@kiln/storage/testing";
import { personWithToken } from "../src/testing/harness.js";
import { type ServerProcess, startSharedDatabaseServer, stopServerProcess } from "./server-process.js";

describe("idempotency across two server processes sharing PostgreSQL", () => {
  let db: { url: string; drop(): Promise<void> };
  let storage: Storage;
  const servers: ServerProcess[] = [];

  before(async () => {
    db = await createPostgresTestDatabase();
    storage = await openStorage({ databaseUrl: db.url, dataDir: "/nonexistent" });
    servers.push(await startSharedDatabaseServer(db.url), await startSharedDatabaseServer(db.url));
  });
  after(async () => {
    for (const s of servers) await stopServerProcess(s);
    await storage.close();
    await db.drop();
  });

  it("50 concurrent requests with one key → exactly one effect; every other answer a replay or in flight", async () => {
    const owner = await personWithToken(storage, { role: "owner" });
    const payload = JSON.stringify({ name: "raced-across", scopes: ["read"], expires_in_seconds: 600 });
    const responses = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const base = servers[i % 2]?.url ?? "";
        const res = await fetch(`${base}/api/credentials`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${owner.token}`,
            "content-type": "application/json",
            "idempotency-key": "two-process-race",
          },
          body: payload,
        });
        return { status: res.status, replayed: res.headers.get("idempotent-replayed"), body: await res.text() };
      }),
    );
    const fresh = responses.filter((r) => r.status === 200 && r.replayed === null);
    const replays = responses.filter((r) => r.status === 200 && r.replayed === "true");
    const inFlight = responses.filter((r) => r.status === 409 && r.body.includes('"idempotency_key_in_flight"'));
    process.stdout.write(
      `# two-process race: ${fresh.length} effect, ${replays.length} replays, ${inFlight.length} in flight\n`,
    );
    assert.equal(
      fresh.length,
      1,
      JSON.stringify(responses.filter((r) => r.status !== 200 && !r.body.includes("in_flight"))),
    );
    assert.equal(replays.length + inFlight.length, 49);
    const view = (body: string | undefined) => (JSON.parse(body ?? "{}") as { view?: unknown }).view;
    for (const r of replays) assert.deepEqual(view(r.body), view(fresh[0]?.body));
    const rows = await storage.db
      .selectFrom("agent_credentials")
      .select("name")
      .where("tenant_id", "=", owner.tenant)
      .execute();
    assert.equal(rows.length, 1);
  });
});
