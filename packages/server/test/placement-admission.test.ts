import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { onboardRepository, registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";

const file = (path: string, text: string) => ({ path, bytes: [...Buffer.from(text)], executable: false });
const FILES = [
  file("Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n'),
  file("src/lib.rs", "pub fn f() {}\n"),
];
const STABLE = ["1.95.0", "stable", "stable-x86_64-unknown-linux-gnu"];

/**
 * A size no enrolled host can ever place is refused at submission (issue 36: a kiln4-cpu job on a
 * two-core `npm start` waited queued forever), naming the sizes this deployment places and what
 * to do; jobs.retry re-checks what submission checks that can have changed since (the size still
 * placeable, the toolchain still installed) and refuses a retry the hosts can no longer run.
 */
for (const dialect of DIALECTS) {
  describe(`jobs.submit and jobs.retry refuse what no enrolled host offers (${dialect.name})`, {
    skip: dialect.skip,
  }, () => {
    let t: TestApp;
    let member: { tenant: string; token: string };
    let keys = 0;
    before(async () => {
      t = await testApp(await dialect.openFresh());
      member = await personWithToken(t.storage, { role: "member" });
      await onboardRepository(
        t.storage,
        { tenantId: member.tenant, name: "acme/widget", onboardedBy: "test" },
        t.clock.now(),
      );
    });
    after(() => t.close());

    const enroll = (vcpus: number, toolchains: string[] = STABLE) =>
      registerHost(t.storage, {
        id: "builder",
        vcpus,
        memoryBytes: 2 ** 34,
        isolation: "sandbox",
        toolchains,
        now: t.clock.now(),
      });
    const call = (method: "POST" | "GET", url: string, body?: unknown) => {
      keys += 1;
      return t.app.inject({
        method,
        url,
        headers: {
          ...bearer(member.token),
          ...(method === "POST" ? { "idempotency-key": `placement-${keys}` } : {}),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
    };
    const submit = (size: string, toolchain?: string) =>
      call("POST", "/api/v4/jobs", {
        schema_version: 1,
        repository: "acme/widget",
        size,
        workspace: {
          base_commit: "0123456789abcdef0123456789abcdef01234567",
          branch: "main",
          invocation: { operation: "test", arguments: [], ...(toolchain === undefined ? {} : { toolchain }) },
          source: { files: FILES },
        },
      });
    /** A job admitted as asked, then cancelled before placement (a terminal job to retry). */
    const cancelled = async (size: string, toolchain?: string) => {
      const submitted = await submit(size, toolchain);
      assert.equal(submitted.statusCode, 200, submitted.body);
      const id = submitted.json() as string;
      const cancel = await call("POST", `/api/jobs/${id}/cancel`);
      assert.equal(cancel.statusCode, 200, cancel.body);
      assert.equal((await call("GET", `/api/jobs/${id}`)).json().status, "cancelled");
      return id;
    };

    it("queues any size while no host enrolled (nothing is known yet)", async () => {
      const res = await submit("kiln16-cpu");
      assert.equal(res.statusCode, 200, res.body);
    });

    it("refuses a size needing more vCPUs than any enrolled host has, naming the sizes it places and the next step", async () => {
      await enroll(2);
      const refused = await submit("kiln4-cpu");
      assert.equal(refused.statusCode, 400, refused.body);
      assert.equal(refused.json().code, "invalid_request");
      assert.equal(
        refused.json().detail,
        "body.size asks for kiln4-cpu, which needs 4 vCPUs; no kiln host here has that many (the largest has 2), so this deployment places only kiln2-cpu: submit with --size kiln2-cpu, or ask the operator to enroll a host with at least 4 vCPUs",
      );
      assert.equal((await submit("kiln2-cpu")).statusCode, 200);
      await enroll(8);
      assert.equal((await submit("kiln8-cpu")).statusCode, 200, "placeable once a host that large enrolled");
      assert.match(
        (await submit("kiln16-cpu")).json().detail,
        /places only kiln2-cpu, kiln4-cpu, kiln8-cpu: submit with --size kiln8-cpu/,
      );
    });

    it("refuses a retry of a job whose size no host can place any more", async () => {
      await enroll(4);
      const id = await cancelled("kiln4-cpu");
      await enroll(2);
      const refused = await call("POST", `/api/jobs/${id}/retry`);
      assert.equal(refused.statusCode, 409, refused.body);
      assert.equal(refused.json().code, "conflict");
      assert.equal(
        refused.json().detail,
        `job ${id} ran on kiln4-cpu, which needs 4 vCPUs; no kiln host here has that many (the largest has 2), so this deployment places only kiln2-cpu: submit it again with --size kiln2-cpu, or ask the operator to enroll a host with at least 4 vCPUs`,
      );
      await enroll(4);
      assert.equal((await call("POST", `/api/jobs/${id}/retry`)).statusCode, 200, "retried once placeable again");
    });

    it("refuses a retry of a job whose toolchain no host has installed any more", async () => {
      await enroll(2, [...STABLE, "nightly"]);
      const id = await cancelled("kiln2-cpu", "nightly");
      await enroll(2, STABLE);
      const refused = await call("POST", `/api/jobs/${id}/retry`);
      assert.equal(refused.statusCode, 409, refused.body);
      assert.equal(refused.json().code, "conflict");
      assert.equal(
        refused.json().detail,
        `job ${id} asked for toolchain nightly, which no kiln host has installed now (installed: 1.95.0, stable); submit it again naming one of those (kiln cargo +<toolchain>), or ask the operator to install it`,
      );
      const stable = await cancelled("kiln2-cpu");
      assert.equal(
        (await call("POST", `/api/jobs/${stable}/retry`)).statusCode,
        200,
        "its default toolchain is installed",
      );
    });
  });
}
