import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";
import { archiveOf, Sources, sha256 } from "./source-archives.js";

/** The harness clock starts at 2026-11-22T08:00:00Z; the bandwidth period is the UTC month. */
const NEXT_PERIOD = "2026-12-01T00:00:00.000Z";
const SECONDS_TO_NEXT_PERIOD = (Date.parse(NEXT_PERIOD) - Date.parse("2026-11-22T08:00:00.000Z")) / 1000;

const crate = (tag: string) => [
  { path: "Cargo.toml", content: `[package]\nname = "${tag}"\nversion = "0.1.0"\nedition = "2021"\n` },
  { path: "src/lib.rs", content: `pub fn ${tag}() -> &'static str { "${tag.repeat(8)}" }\n` },
];

/**
 * Bandwidth (operator.tenants.controls `bandwidth_bytes_per_month`) enforced where source bytes
 * are received: sources.chunk.put refuses a part that would pass the allowance, sources.reserve
 * refuses a new upload once it is used up — `conflict` with the retry time (the start of the next
 * calendar month) — and a refusal leaves nothing behind. tenant.settings.get and usage.report
 * show the same bytes the check counts.
 */
for (const dialect of DIALECTS) {
  describe(`bandwidth allowance at upload (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let member: { tenant: string; token: string };
    let sources: Sources;
    let operator: OperatorClient;

    before(async () => {
      ({ t, person: member } = await appWithTenant(dialect, { role: "member" }));
      sources = new Sources(t.app, member.token);
      operator = await operatorClient(t.app, t.storage, t.clock.now());
    });
    after(() => t.close());

    const controls = () => operator.tenantControls(member.tenant);
    const setAllowance = async (bytes: number) => {
      const res = await operator.changeTenantControls(member.tenant, { bandwidth_bytes_per_month: bytes });
      assert.equal(res.statusCode, 200, res.body);
    };
    const bandwidthSetting = async () => {
      const res = await t.app.inject({ method: "GET", url: "/api/tenant/settings", headers: bearer(member.token) });
      return (res.json() as { limits: { bandwidth_bytes_per_month: { limit: number; consumption: number } } }).limits
        .bandwidth_bytes_per_month;
    };
    const reportedUploaded = async (period: string) => {
      const res = await t.app.inject({
        method: "GET",
        url: `/api/usage?period=${period}`,
        headers: bearer(member.token),
      });
      return (res.json() as { totals: { bytes_uploaded: number } }).totals.bytes_uploaded;
    };
    const partBytes = (parts: Buffer[]) => parts.reduce((n, p) => n + p.length, 0);

    it("under the allowance uploads are accepted; a part that would pass it is refused with the retry time, leaving nothing", async () => {
      const first = archiveOf(crate("alpha"), [], { partBytes: 48 });
      const second = archiveOf(crate("bravo"), [], { partBytes: 48 });
      const firstBytes = partBytes(first.parts);
      const secondFirstPart = second.parts[0] as Buffer;
      // Room for the whole first upload and less than the second's first part.
      await setAllowance(firstBytes + secondFirstPart.length - 1);

      const done = await sources.upload(first, "bw-first");
      assert.equal(done.status, 200, done.body);
      assert.equal(done.json().state, "verified");
      assert.deepEqual(await bandwidthSetting(), {
        limit: firstBytes + secondFirstPart.length - 1,
        consumption: firstBytes,
      });

      // Reserving is still accepted (the allowance is not used up), the part over it is not.
      assert.equal((await sources.reserve(second.reservation, "bw-second")).status, 200);
      const refused = await sources.put("bw-second", 1, secondFirstPart);
      assert.equal(refused.status, 409, refused.body);
      const refusal = refused.json();
      assert.equal(refusal.code, "conflict");
      assert.equal(refusal.retry_after_seconds, SECONDS_TO_NEXT_PERIOD);
      assert.equal(refusal.reset_at, NEXT_PERIOD);
      assert.match(refusal.detail, /bandwidth allowance for 2026-11 is used/);
      assert.match(refusal.detail, new RegExp(`${firstBytes} of ${firstBytes + secondFirstPart.length - 1}`));

      // Nothing of the refused part was kept: not held by the upload, not in the blob store, not counted.
      const status = (await sources.status("bw-second")).json();
      assert.deepEqual(status.missing_parts, [{ first: 1, last: second.parts.length }]);
      assert.equal(await t.deps.blobs.has(sha256(secondFirstPart)), false);
      assert.equal((await bandwidthSetting()).consumption, firstBytes);
      assert.equal((await controls()).consumption.bandwidth_bytes_this_month, firstBytes);
      assert.equal(await reportedUploaded("2026-11"), firstBytes);

      // Raised by the operator, the same part is accepted and the upload completes.
      await setAllowance(firstBytes + partBytes(second.parts));
      assert.equal((await sources.put("bw-second", 1, secondFirstPart)).status, 204);
      const completed = await sources.upload(second, "bw-second");
      assert.equal(completed.json().state, "verified", completed.body);
      assert.equal((await bandwidthSetting()).consumption, firstBytes + partBytes(second.parts));
      assert.equal(await reportedUploaded("2026-11"), firstBytes + partBytes(second.parts));
    });

    it("once the allowance is used up a new reservation is refused and none is made; the next month admits again", async () => {
      const used = (await bandwidthSetting()).consumption;
      await setAllowance(used);
      const third = archiveOf(crate("charlie"), [], { partBytes: 48 });
      const refused = await sources.reserve(third.reservation, "bw-third");
      assert.equal(refused.status, 409, refused.body);
      assert.equal(refused.json().code, "conflict");
      assert.equal(refused.json().retry_after_seconds, SECONDS_TO_NEXT_PERIOD);
      assert.equal(refused.json().reset_at, NEXT_PERIOD);
      assert.equal(refused.json().status, 409);
      assert.equal((await sources.status("bw-third")).status, 404, "the refused reservation left no upload");

      // At the retry time a new period starts from zero.
      await t.clock.advance(SECONDS_TO_NEXT_PERIOD * 1000);
      assert.equal((await bandwidthSetting()).consumption, 0);
      const again = await sources.upload(third, "bw-third");
      assert.equal(again.json().state, "verified", again.body);
      assert.equal((await bandwidthSetting()).consumption, partBytes(third.parts));
      assert.equal(await reportedUploaded("2026-12"), partBytes(third.parts));
      assert.equal(await reportedUploaded("2026-11"), used);
    });
  });
}
