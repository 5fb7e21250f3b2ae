import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fastifyCookie from "@fastify/cookie";
import { type Operation, operationById } from "@kiln/contract";
import { openSqliteForTest } from "@kiln/storage/testing";
import Fastify, { type FastifyInstance } from "fastify";
import { personWithToken, type TestApp, testApp, testBlobs } from "../src/testing/harness.js";
import { signIn } from "../src/testing/sign-in.js";
import { enforceSecurity } from "../src/web/http/enforce-security.js";
import { installErrorBoundary } from "../src/web/http/error-boundary.js";

/**
 * Over HTTP a session cookie reaches only read-scoped operations, which every role
 * holds; the dashboard will reach the others in-process. This drives the one security
 * path with a session on an operation above the person's role.
 */
describe("a session whose role lacks the scope", () => {
  let t: TestApp;
  let probe: FastifyInstance;
  before(async () => {
    t = await testApp(await openSqliteForTest());
    const base = operationById("usage.export");
    const adminOnly: Operation = { ...base, security: { kind: "tenant", scope: "admin", cookie: true } };
    probe = Fastify();
    await probe.register(fastifyCookie);
    installErrorBoundary(probe);
    probe.get("/probe", async (request) => {
      const caller = await enforceSecurity(
        { storage: t.storage, clock: t.clock, version: "test", publicOrigin: "http://kiln.test", blobs: testBlobs() },
        adminOnly,
        request,
      );
      return { principal: caller.principal?.principal };
    });
  });
  after(async () => {
    await probe.close();
    await t.close();
  });

  it("is refused role_required naming the least role that holds it", async () => {
    const viewer = await personWithToken(t.storage, { role: "viewer" });
    const email = (
      await t.storage.db.selectFrom("persons").select("email").where("id", "=", viewer.userId).executeTakeFirstOrThrow()
    ).email;
    const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
    const res = await probe.inject({ method: "GET", url: "/probe", headers: { cookie: `kiln_session=${cookie}` } });
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().code, "role_required");
    assert.equal(res.json().role, "admin");
  });

  it("passes for a person whose role holds it", async () => {
    const owner = await personWithToken(t.storage, { role: "owner" });
    const email = (
      await t.storage.db.selectFrom("persons").select("email").where("id", "=", owner.userId).executeTakeFirstOrThrow()
    ).email;
    const cookie = await signIn(t.app, t.storage, email, undefined, t.clock);
    const res = await probe.inject({ method: "GET", url: "/probe", headers: { cookie: `kiln_session=${cookie}` } });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().principal, owner.userId);
  });
});
