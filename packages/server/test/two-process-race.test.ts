import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { openStorage, type Storage } from "@kiln/storage";
import { createPostgresTestDatabase } from "@kiln/storage/testing";
import { personWithToken } from "./harness.js";

const MAIN = fileURLToPath(new URL("../src/main.js", import.meta.url));

/** Starts `kiln-server serve` on an ephemeral port and resolves its base URL once it listens. */
async function startServer(databaseUrl: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [MAIN, "serve"], {
    env: {
      ...process.env,
      KILN_LISTEN: "127.0.0.1:0",
      KILN_DATABASE_URL: databaseUrl,
      KILN_LOG_LEVEL: "warn",
      KILN_LOCAL_HOST: "off",
      KILN_DATA_DIR: mkdtempSync(join(tmpdir(), "kiln-proc-")),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout?.setEncoding("utf8");
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 20000);
    child.stdout?.on("data", (chunk: string) => {
      out += chunk;
      const m = /serving (http:\/\/\S+)/.exec(out);
      if (m?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
  return { url, child };
}

describe("idempotency across two server processes sharing PostgreSQL", () => {
  let db: { url: string; drop(): Promise<void> };
  let storage: Storage;
  const servers: { url: string; child: ChildProcess }[] = [];

  before(async () => {
    db = await createPostgresTestDatabase();
    storage = await openStorage({ databaseUrl: db.url, dataDir: "/nonexistent" });
    servers.push(await startServer(db.url), await startServer(db.url));
  });
  after(async () => {
    for (const s of servers) {
      s.child.kill("SIGTERM");
      if (s.child.exitCode === null) await once(s.child, "exit");
    }
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
