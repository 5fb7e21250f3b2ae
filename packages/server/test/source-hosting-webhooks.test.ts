import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { findInstallationOfRepository, readInstallation, readWebhookDelivery } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { GitHubApp } from "../src/domain/source-hosting/github-app.js";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { GitHubSimulator, type SimulatedDelivery } from "./github-simulator.js";

const HEAD = "abc".padStart(40, "0");

/** A request body of `total` bytes produced only as the server reads it; `pulled` counts what it took. */
function lazyBody(total: number): { stream: Readable; pulled: () => number } {
  let pulled = 0;
  const chunk = Buffer.alloc(64 * 1024, " ");
  const stream = new Readable({
    read() {
      if (pulled >= total) {
        this.push(null);
        return;
      }
      const length = Math.min(chunk.length, total - pulled);
      pulled += length;
      this.push(chunk.subarray(0, length));
    },
  });
  return { stream, pulled: () => pulled };
}

for (const dialect of DIALECTS) {
  describe(`GitHub webhooks (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let sim: GitHubSimulator;
    let owner: { tenant: string; userId: string; token: string };
    let keys = 0;
    before(async () => {
      sim = new GitHubSimulator();
      sim.installations.set(101, { account: "acme", suspended: false, repositories: ["acme/widget", "acme/gadget"] });
      await sim.start();
      const app = new GitHubApp(
        {
          appId: sim.appId,
          privateKey: sim.privateKey,
          webhookSecret: sim.webhookSecret,
          slug: "kiln-test",
          apiBaseUrl: sim.url,
          allowUnverifiedClaims: true,
        },
        silentLogger,
      );
      ({ t, person: owner } = await appWithTenant(dialect, {
        role: "owner",
        repository: null,
        deps: { gitHubApp: app },
      }));
      const claimed = await t.app.inject({
        method: "POST",
        url: "/api/onboarding/claims",
        headers: { ...bearer(owner.token), "idempotency-key": "claim" },
        payload: { installation_id: 101 },
      });
      assert.equal(claimed.statusCode, 200, claimed.body);
    });
    after(async () => {
      await t.close();
      await sim.stop();
    });

    const post = async (delivery: SimulatedDelivery) => {
      const res = await t.app.inject({
        method: "POST",
        url: "/webhooks/github",
        headers: delivery.headers,
        payload: delivery.body,
      });
      return { status: res.statusCode, body: res.json() };
    };
    const installationOf = (id: number) => ({ id, account: { login: "acme" } });
    const repositories = async () =>
      (await t.app.inject({ method: "GET", url: "/api/repositories", headers: bearer(owner.token) }))
        .json()
        .repositories.map((r: { repository: string }) => r.repository);
    const audit = async (target: string) =>
      (await t.app.inject({ method: "GET", url: "/api/audit", headers: bearer(owner.token) }))
        .json()
        .entries.filter((e: { target: string }) => e.target === target);
    const submit = (repository: string) =>
      t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(owner.token), "idempotency-key": `job-${++keys}` },
        payload: { ...inlineSubmission(repository), check: { head_sha: HEAD } },
      });

    it("refuses a delivery with a bad or missing signature (401) and changes nothing", async () => {
      const suspend = { action: "suspend", installation: installationOf(101) };
      for (const signature of ["bad", "none"] as const) {
        const delivery = sim.delivery("installation", suspend, { signature });
        const res = await post(delivery);
        assert.equal(res.status, 401);
        assert.equal(res.body.code, "unauthenticated");
        assert.equal(
          await readWebhookDelivery(t.storage, { deliveryId: delivery.headers["x-github-delivery"] ?? "" }),
          undefined,
        );
      }
      // A body altered after signing is refused too.
      const signed = sim.delivery("installation", suspend);
      const tampered = await post({ ...signed, body: signed.body.replace("suspend", "deleted") });
      assert.equal(tampered.status, 401);
      assert.equal((await readInstallation(t.storage, { installationId: 101 }))?.state, "active");
      assert.deepEqual(await audit("installation:101").then((e) => e.length), 1, "only the claim is audited");
    });

    it("refuses an unsigned or oversized delivery by its headers, before its body is read", async () => {
      const declared = 24 * 1024 * 1024;
      const headersOf = (delivery: SimulatedDelivery, extra: Record<string, string>) => ({
        ...delivery.headers,
        "content-length": String(declared),
        ...extra,
      });
      const cases: [string, Record<string, string>, number, string][] = [
        ["no signature", headersOf(sim.delivery("ping", {}, { signature: "none" }), {}), 401, "unauthenticated"],
        [
          "a signature not of the provider's form",
          headersOf(sim.delivery("ping", {}), { "x-hub-signature-256": "sha256=not-hex" }),
          401,
          "unauthenticated",
        ],
        [
          "a declared length over the provider's largest",
          headersOf(sim.delivery("ping", {}), { "content-length": String(26 * 1024 * 1024) }),
          400,
          "invalid_request",
        ],
      ];
      for (const [what, headers, status, code] of cases) {
        const body = lazyBody(Number(headers["content-length"]));
        const res = await t.app.inject({ method: "POST", url: "/webhooks/github", headers, payload: body.stream });
        assert.equal(res.statusCode, status, `${what}: ${res.body}`);
        assert.equal(res.json().code, code, what);
        // Nothing reads the request, so at most the stream's first buffers were produced.
        assert.ok(body.pulled() <= 1024 * 1024, `${what}: ${body.pulled()} bytes were read before the refusal`);
        body.stream.destroy();
      }
    });

    it("keeps the repository list in sync: added repositories are onboarded, removed ones no longer covered; a replay is ignored", async () => {
      const delivery = sim.delivery("installation_repositories", {
        action: "added",
        installation: installationOf(101),
        repositories_added: [{ id: 9, full_name: "acme/extra" }],
        repositories_removed: [],
      });
      const res = await post(delivery);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual((await repositories()).sort(), ["acme/extra", "acme/gadget", "acme/widget"]);
      assert.equal(
        (await findInstallationOfRepository(t.storage, { tenantId: owner.tenant, repository: "acme/extra" }))
          ?.installationId,
        101,
      );
      const replay = await post(delivery);
      assert.equal(replay.status, 202);
      assert.match(replay.body.outcome, /already received/);

      const removed = await post(
        sim.delivery("installation_repositories", {
          action: "removed",
          installation: installationOf(101),
          repositories_added: [],
          repositories_removed: [{ id: 2, full_name: "acme/gadget" }],
        }),
      );
      assert.equal(removed.status, 200);
      assert.equal(
        await findInstallationOfRepository(t.storage, { tenantId: owner.tenant, repository: "acme/gadget" }),
        undefined,
      );
      const entries = await audit("installation:101");
      assert.equal(entries.length, 3, "the claim, the addition once (not its replay), the removal");
      assert.equal(entries.filter((e: { actor: string }) => e.actor === "github").length, 2);
    });

    it("processes a signed body once, whatever delivery id it arrives under", async () => {
      const delivery = sim.delivery("installation_repositories", {
        action: "added",
        installation: installationOf(101),
        repositories_added: [{ id: 10, full_name: "acme/replayed" }],
        repositories_removed: [],
      });
      const before = (await audit("installation:101")).length;
      assert.equal((await post(delivery)).status, 200);
      for (const deliveryId of ["11111111-1111-4111-8111-111111111111", "another id entirely"]) {
        const replay = await post({ ...delivery, headers: { ...delivery.headers, "x-github-delivery": deliveryId } });
        assert.equal(replay.status, 202, JSON.stringify(replay.body));
        assert.match(replay.body.outcome, /already received/);
        assert.equal(await readWebhookDelivery(t.storage, { deliveryId }), undefined, "the replay is not recorded");
      }
      assert.equal((await audit("installation:101")).length, before + 1, "the change is audited once");
    });

    it("answers unknown events, actions and installations 202 and ignores them", async () => {
      assert.equal((await post(sim.delivery("ping", { zen: "Keep it logically awesome." }))).status, 202);
      assert.equal((await post(sim.delivery("push", { installation: installationOf(101) }))).status, 202);
      const stranger = await post(
        sim.delivery("installation", { action: "suspend", installation: installationOf(999) }),
      );
      assert.equal(stranger.status, 202);
      assert.match(stranger.body.outcome, /not claimed/);
      assert.equal(
        (
          await post(
            sim.delivery("installation", { action: "new_permissions_accepted", installation: installationOf(101) }),
          )
        ).status,
        202,
      );
      assert.equal((await readInstallation(t.storage, { installationId: 101 }))?.state, "active");
    });

    it("a suspended or deleted installation: installation_active is false and its repositories' submissions are refused naming why", async () => {
      const state = async (action: string) =>
        assert.equal(
          (await post(sim.delivery("installation", { action, installation: installationOf(101) }))).status,
          200,
        );
      await state("suspend");
      const surface = await t.app.inject({ method: "GET", url: "/api/onboarding", headers: bearer(owner.token) });
      assert.equal(surface.json().installation_active, false);
      const refused = await submit("acme/widget");
      assert.equal(refused.statusCode, 409, refused.body);
      assert.equal(refused.json().code, "conflict");
      assert.match(refused.json().detail, /installation 101 .* is suspended on the provider/);

      await state("unsuspend");
      assert.equal((await submit("acme/widget")).statusCode, 200);

      await state("deleted");
      const gone = await submit("acme/widget");
      assert.equal(gone.statusCode, 409);
      assert.match(gone.json().detail, /deleted/);
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(owner.token) });
      assert.equal(identity.json().installation_active, false);
      await state("created");
      assert.equal((await submit("acme/widget")).statusCode, 200);
    });

    it("a re-run requested on the provider retries the job once, attributed and audited as github", async () => {
      const submitted = await submit("acme/widget");
      assert.equal(submitted.statusCode, 200, submitted.body);
      const jobId = submitted.json() as string;
      // The provider's check run carries its state, so rerequests at different moments differ.
      const rerun = (external_id: string, repository = "acme/widget", status = "completed") =>
        sim.delivery("check_run", {
          action: "rerequested",
          installation: installationOf(101),
          repository: { full_name: repository },
          check_run: { id: 7_000_000_001, name: "kiln", external_id, status },
          sender: { login: "octocat" },
        });
      const early = await post(rerun(jobId, "acme/widget", "queued"));
      assert.equal(early.status, 202, "a job still queued is not retried");
      assert.match(early.body.outcome, /jobs\.retry refused: conflict/);

      const cancelled = await t.app.inject({
        method: "POST",
        url: `/api/jobs/${jobId}/cancel`,
        headers: { ...bearer(owner.token), "idempotency-key": `cancel-${++keys}` },
      });
      assert.equal(cancelled.statusCode, 200, cancelled.body);
      const delivery = rerun(jobId);
      const res = await post(delivery);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal((await post(delivery)).status, 202, "a replay retries nothing");
      const retries = await t.storage.db
        .selectFrom("jobs")
        .select(["id", "submitted_by", "status"])
        .where("retry_of", "=", jobId)
        .execute();
      assert.equal(retries.length, 1);
      assert.deepEqual([retries[0]?.submitted_by, retries[0]?.status], ["github", "queued"]);
      assert.match(res.body.outcome, new RegExp(`retried as ${retries[0]?.id}`));
      const entries = await audit(`job:${jobId}`);
      assert.equal(entries.length, 1);
      assert.equal(entries[0].actor, "github");
      assert.match(entries[0].value, /octocat/);

      const elsewhere = await post(rerun(jobId, "acme/gadget"));
      assert.equal(elsewhere.status, 202, "the job must be of the repository the delivery names");
      assert.equal((await post(rerun("j_nonexistent"))).status, 202);
    });

    it("the simulator POSTs a signed delivery to a listening kiln", async () => {
      const address = await t.app.listen({ port: 0, host: "127.0.0.1" });
      const good = await sim.deliver(`${address}/webhooks/github`, sim.delivery("ping", { zen: "hi" }));
      assert.equal(good.status, 202, good.body);
      const bad = await sim.deliver(
        `${address}/webhooks/github`,
        sim.delivery("ping", { zen: "hi" }, { signature: "bad" }),
      );
      assert.equal(bad.status, 401);
    });
  });
}
