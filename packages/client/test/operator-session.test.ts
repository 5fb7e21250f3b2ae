import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { TestApp } from "@kiln/server/testing";
import { registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { KilnRefusal, OPERATOR_SESSION_COOKIE, openOperatorSession } from "../src/index.js";

/** The server's test fixtures, loaded by the tests that run a server. */
const serverTesting = () => import("@kiln/server/testing");

/**
 * openOperatorSession against the real app listening on loopback: the bootstrap credential
 * opens a session once, the session cookie and kiln's own Origin carry every later operator
 * operation (mutations included, which the CSRF lock refuses without an Origin), and close
 * ends the session on the server.
 */
for (const dialect of DIALECTS) {
  describe(`operator session client (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let endpoint: string;
    let credential: string;

    before(async () => {
      const { testApp, masterKey, operatorCredential } = await serverTesting();
      t = await testApp(await dialect.openFresh());
      await registerHost(t.storage, {
        id: "builder-1",
        vcpus: 8,
        memoryBytes: 2 ** 34,
        isolation: "sandbox",
        now: t.clock.now(),
      });
      credential = await operatorCredential(
        t.storage,
        masterKey(mkdtempSync(join(tmpdir(), "kiln-key-"))),
        false,
        t.clock.now(),
      );
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      endpoint = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    });
    after(() => t.close());

    it("names the cookie the server sets", async () => {
      const { OPERATOR_SESSION_COOKIE: served } = await serverTesting();
      assert.equal(OPERATOR_SESSION_COOKIE, served);
    });

    it("opens a session with the credential, reads and mutates through it, and close ends it", async () => {
      const presented: Headers[] = [];
      const recording: typeof fetch = (input, init) => {
        presented.push(new Headers(init?.headers));
        return fetch(input, init);
      };
      const session = await openOperatorSession({ endpoint, credential, fetch: recording });
      const hosts = await session.client.call("operator.hosts.list", {});
      assert.deepEqual(
        hosts.map((h) => h.host),
        ["builder-1"],
      );
      // A POST over the cookie passes the operator surface's cross-site lock only with an Origin.
      const drained = await session.client.call("operator.hosts.drain", { params: { id: "builder-1" } });
      assert.equal(drained.state, "drained");
      await session.close();

      assert.equal(presented[0]?.get("authorization"), `Bearer ${credential}`, "the session is opened by bearer");
      for (const headers of presented.slice(1)) {
        assert.equal(headers.get("authorization"), null, "the credential is presented only once");
        assert.match(headers.get("cookie") ?? "", new RegExp(`^${OPERATOR_SESSION_COOKIE}=`));
        assert.equal(headers.get("origin"), endpoint);
      }
      await assert.rejects(
        session.client.call("operator.hosts.list", {}),
        (error: unknown) => error instanceof KilnRefusal && error.code === "operator_not_found",
        "after close the cookie names no live session",
      );
    });

    it("a wrong credential is refused operator_not_found and opens nothing", async () => {
      await assert.rejects(
        openOperatorSession({ endpoint, credential: `${credential}x` }),
        (error: unknown) => error instanceof KilnRefusal && error.code === "operator_not_found",
      );
    });
  });
}
