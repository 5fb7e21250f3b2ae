import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { systemClock } from "@kiln/contract";
import { buildApp, hashToken, mintToken } from "@kiln/server";
import { addPersonToTenant, createTenant, issueCliToken, LocalBlobStore, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { createClient, KilnRefusal, KilnTransportError } from "../src/index.js";

describe("typed client against a real listening server", () => {
  let storage: Storage;
  let app: FastifyInstance;
  let endpoint: string;
  let token: string;
  before(async () => {
    storage = await openSqliteForTest();
    app = buildApp({
      storage,
      clock: systemClock,
      version: "test",
      publicOrigin: "http://kiln.test",
      blobs: new LocalBlobStore(mkdtempSync(join(tmpdir(), "kiln-blobs-"))),
      checkResponses: true,
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    endpoint = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    await createTenant(storage, { id: "acme" }, new Date());
    const { person } = await addPersonToTenant(
      storage,
      { tenantId: "acme", email: "ada@acme.dev", role: "owner" },
      new Date(),
    );
    token = mintToken("cli");
    await issueCliToken(
      storage,
      {
        tenantId: "acme",
        personId: person.id,
        tokenHash: hashToken(token),
        requestingHost: "t",
      },
      new Date(),
    );
  });
  after(async () => {
    await app.close();
    await storage.close();
  });

  it("calls operations by id with typed inputs and outputs", async () => {
    const client = createClient({ endpoint, token });
    const issued = await client.call("credentials.create", {
      body: { name: "typed", scopes: ["read"], expires_in_seconds: 600 },
      idempotencyKey: "client-1",
    });
    assert.match(issued.credential, /^kiln_agent_/);
    assert.equal(issued.view.principal, "agent:typed");
    const page = await client.call("credentials.list", { query: { limit: 10 } });
    assert.deepEqual(
      page.credentials.map((c) => c.name),
      ["typed"],
    );
    const doc = await client.call("openapi.document", {});
    assert.equal(doc.openapi, "3.1.0");
  });

  it("a refusal is a KilnRefusal carrying the typed document; a dead endpoint is a KilnTransportError", async () => {
    const client = createClient({ endpoint, token });
    await assert.rejects(
      client.call("credentials.revoke", { params: { name: "nobody" }, idempotencyKey: "client-2" }),
      (error: unknown) => error instanceof KilnRefusal && error.code === "not_found" && error.refusal.status === 404,
    );
    const dead = createClient({ endpoint: "http://127.0.0.1:9", token });
    await assert.rejects(dead.call("credentials.list", {}), KilnTransportError);
  });

  it("types follow the catalogue", () => {
    const client = createClient({ endpoint, token });
    const unkeyed = { body: { name: "x", scopes: ["read" as const], expires_in_seconds: 60 } };
    // @ts-expect-error credentials.create is keyed: the idempotency key is required
    void (() => client.call("credentials.create", unkeyed));
    const badScope = { body: { name: "x", scopes: ["root" as const], expires_in_seconds: 60 }, idempotencyKey: "k" };
    // @ts-expect-error scopes are the spec's enum
    void (() => client.call("credentials.create", badScope));
    // @ts-expect-error no such operation
    void (() => client.call("jobs.explode", {}));
  });
});
