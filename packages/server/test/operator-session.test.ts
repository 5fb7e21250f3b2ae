import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DIALECTS } from "@kiln/storage/testing";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";

for (const dialect of DIALECTS) {
  describe(`operator session (${dialect.name})`, () => {
    let t: TestApp;
    let credential: string;
    before(async () => {
      t = await testApp(await dialect.openFresh());
      const key = masterKey(await mkdtemp(join(tmpdir(), "kiln-key-")));
      credential = await operatorCredential(t.storage, key, false, t.clock.now());
      assert.equal(
        await operatorCredential(t.storage, key, false, t.clock.now()),
        credential,
        "shown again, not re-minted",
      );
    });
    after(() => t.close());

    it("the bootstrap credential opens a session; operator operations then answer; DELETE ends it", async () => {
      const wrong = await t.app.inject({
        method: "POST",
        url: "/operator/auth/session",
        headers: { authorization: "Bearer kiln_operator_wrong" },
      });
      assert.equal(wrong.statusCode, 404);
      assert.equal(wrong.json().code, "operator_not_found");

      const opened = await t.app.inject({
        method: "POST",
        url: "/operator/auth/session",
        headers: { authorization: `Bearer ${credential}` },
      });
      assert.equal(opened.statusCode, 204, opened.body);
      const cookie = opened.cookies.find((c) => c.name === "kiln_operator_session");
      assert.ok(cookie);
      assert.equal(cookie.httpOnly, true);
      assert.equal(cookie.path, "/operator");
      // As the operator console's own pages send it: a mutation names its origin.
      const session = { cookie: `kiln_operator_session=${cookie.value}`, origin: "http://kiln.test" };

      const audit = await t.app.inject({ method: "GET", url: "/operator/api/audit", headers: session });
      assert.equal(audit.statusCode, 200, audit.body);
      const entries = audit.json() as { sequence: number; operation: string }[];
      assert.equal(entries[0]?.operation, "operator.session.create");

      const sequence = entries[0]?.sequence ?? 0;
      const patch = await t.app.inject({ method: "PATCH", url: `/operator/api/audit/${sequence}`, headers: session });
      assert.equal(patch.statusCode, 200, patch.body);
      assert.equal(patch.json().refused, true);
      const del = await t.app.inject({ method: "DELETE", url: `/operator/api/audit/${sequence}`, headers: session });
      assert.equal(del.json().attempted, "DELETE");
      const missing = await t.app.inject({ method: "DELETE", url: "/operator/api/audit/999999", headers: session });
      assert.equal(missing.statusCode, 409);
      assert.equal(missing.json().code, "conflict");
      const after = (
        await t.app.inject({ method: "GET", url: "/operator/api/audit/export", headers: session })
      ).json() as {
        operation: string;
        outcome?: string;
      }[];
      assert.deepEqual(
        after.slice(0, 3).map((e) => `${e.operation} ${e.outcome}`),
        [
          "operator.audit.refuse_delete conflict",
          "operator.audit.refuse_delete refused",
          "operator.audit.refuse_patch refused",
        ],
      );

      const closed = await t.app.inject({ method: "DELETE", url: "/operator/auth/session", headers: session });
      assert.equal(closed.statusCode, 204);
      const gone = await t.app.inject({ method: "GET", url: "/operator/api/audit", headers: session });
      assert.equal(gone.json().code, "operator_not_found");
    });

    it("a rotated credential stops opening sessions", async () => {
      const key = masterKey(await mkdtemp(join(tmpdir(), "kiln-key-")));
      const old = credential;
      const rotated = await operatorCredential(t.storage, key, true, t.clock.now());
      assert.notEqual(rotated, old);
      const refused = await t.app.inject({
        method: "POST",
        url: "/operator/auth/session",
        headers: { authorization: `Bearer ${old}` },
      });
      assert.equal(refused.json().code, "operator_not_found");
      const ok = await t.app.inject({
        method: "POST",
        url: "/operator/auth/session",
        headers: { authorization: `Bearer ${rotated}` },
      });
      assert.equal(ok.statusCode, 204);
    });
  });
}
