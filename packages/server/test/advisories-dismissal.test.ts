import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { finishColdJob } from "./cold-job-fixture.js";

/**
 * Dismissals through the API on both engines, with attempt reports a test host files through
 * the host protocol (no cargo): a lineage cold every time for one cause is advised; dismissed,
 * it stays hidden while the cause stays; when the measured cause changes, the advisory has a
 * new basis and id and shows again.
 */
for (const dialect of DIALECTS) {
  describe(`advisory dismissals through the API (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let owner: { tenant: string; userId: string; token: string };
    let keys = 0;
    let generation = 0;

    before(async () => {
      ({ t, person: owner } = await appWithTenant(dialect, { role: "owner", repository: null }));
      for (const name of ["acme/widget", "acme/gadget"]) {
        await onboardRepository(t.storage, { tenantId: owner.tenant, name, onboardedBy: "test" }, t.clock.now());
      }
    });
    after(() => t.close());

    const get = async (url: string) => {
      const res = await t.app.inject({ method: "GET", url, headers: bearer(owner.token) });
      assert.equal(res.statusCode, 200, res.body);
      return res.json();
    };
    const dismiss = async (repository: string, advisory: string) => {
      const res = await t.app.inject({
        method: "POST",
        url: `/api/repositories/${repository}/advisories/${advisory}/dismissal`,
        headers: { ...bearer(owner.token), "idempotency-key": `dismiss-${++keys}` },
      });
      return { status: res.statusCode, body: res.json() };
    };
    /** A job of `repository` whose attempt reports its lineage cold for `reason`. */
    const coldJob = async (repository: string, reason: string) => {
      generation += 1;
      const lineage = `lin_${repository.replace("/", "_")}`;
      await finishColdJob(t, { token: owner.token, repository, lineage, reason, savedBytes: 1000, generation });
    };
    const coldAdvisories = async (repository: string) =>
      ((await get(`/api/repositories/${repository}`)).advisories as { key: string; id: string }[]).filter(
        (a) => a.key === "lineage-always-cold",
      );

    it("hides a dismissed advisory while its basis holds and shows it again under a new basis", async () => {
      for (const repository of ["acme/widget", "acme/gadget"]) {
        for (let i = 0; i < 3; i++) await coldJob(repository, "evicted");
      }
      const [widget] = await coldAdvisories("acme/widget");
      const [gadget] = await coldAdvisories("acme/gadget");
      assert.ok(widget && gadget);
      assert.notEqual(widget.id, gadget.id, "each repository's advisory is its own");

      const dismissed = await dismiss("acme/widget", widget.id);
      assert.equal(dismissed.status, 200, JSON.stringify(dismissed.body));
      assert.deepEqual(dismissed.body, { advisory: widget.id, dismissed_by: owner.userId });
      assert.deepEqual(await coldAdvisories("acme/widget"), []);
      assert.deepEqual(
        ((await get("/api/repositories")).advisories as { id: string; repository: string }[]).map((a) => [
          a.repository,
          a.id,
        ]),
        [["acme/gadget", gadget.id]],
        "listed: only the undismissed one",
      );

      // One more job for the same cause: the same basis, still dismissed.
      await coldJob("acme/widget", "evicted");
      assert.deepEqual(await coldAdvisories("acme/widget"), []);
      // The cause measured changes (now mostly "lineage in use"): a new basis, a new advisory.
      for (let i = 0; i < 5; i++) await coldJob("acme/widget", "lineage in use");
      const [again] = await coldAdvisories("acme/widget");
      assert.ok(again, "shows again under its new basis");
      assert.notEqual(again.id, widget.id);
      // The old id is no longer computed for the repository: not_found.
      assert.equal((await dismiss("acme/widget", widget.id)).body.code, "not_found");
    });
  });
}
