/**
 * The per-tenant ingress bound (web/http/tenant-ingress-shaper.ts) on a manual clock: while another
 * tenant is served, a burst reads at once and what follows at the rate, tenants apart; a tenant
 * alone reads at full speed and owes nothing; a shaped stream passes every byte in order or
 * fails with its source.
 */
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import { configFromEnv, DEFAULT_TENANT_INGRESS } from "../src/config.js";
import { CANARY_TENANT } from "../src/domain/platform/platform-tenants.js";
import { SHARED_FOR_MS, TenantIngressShaper } from "../src/web/http/tenant-ingress-shaper.js";

const MiB = 2 ** 20;

/** A shaper on `clock` with another tenant ("other") just served, so every tenant but it is shaped. */
function sharedShaper(bytesPerSecond: number, burstBytes: number, clock: ManualClock): TenantIngressShaper {
  const shaper = new TenantIngressShaper(bytesPerSecond, burstBytes, clock);
  shaper.served("other");
  return shaper;
}

describe("a tenant's ingress rate while others are served", () => {
  it("lets a burst through at once, then charges each byte at the rate", () => {
    const clock = new ManualClock();
    const shaper = sharedShaper(MiB, 2 * MiB, clock); // 1 MiB/s, 2 MiB burst
    assert.equal(shaper.take("a", MiB), 0);
    assert.equal(shaper.take("a", MiB), 0);
    assert.equal(shaper.take("a", MiB), 0, "the third MiB is within the burst's 2 s ahead");
    assert.equal(shaper.take("a", MiB), 1000, "the fourth waits until the first second is paid");
    assert.equal(shaper.take("a", MiB / 2), 2000);
  });

  it("keeps each tenant's allowance apart", () => {
    const clock = new ManualClock();
    const shaper = sharedShaper(MiB, MiB, clock);
    shaper.served("quiet");
    assert.equal(shaper.take("noisy", 8 * MiB), 0);
    assert.equal(shaper.take("noisy", MiB), 7000);
    assert.equal(shaper.take("quiet", MiB), 0, "another tenant's bytes are read at once");
  });

  it("refills with time: a tenant idle for its burst's worth reads a burst again", async () => {
    const clock = new ManualClock();
    const shaper = sharedShaper(MiB, MiB, clock);
    assert.equal(shaper.take("a", 3 * MiB), 0);
    assert.equal(shaper.take("a", MiB), 2000);
    await clock.advance(4000);
    shaper.served("other");
    assert.equal(shaper.take("a", MiB), 0);
    assert.equal(shaper.take("a", MiB), 0);
    assert.equal(shaper.take("a", MiB), 1000);
  });

  it("forgets tenants whose bytes are all paid for once it remembers many", async () => {
    const clock = new ManualClock();
    const shaper = sharedShaper(MiB, MiB, clock);
    for (let i = 0; i < 1024; i++) shaper.take(`t${i}`, 1024);
    assert.equal(shaper.tenants, 1024);
    await clock.advance(1000);
    shaper.take("late", 3 * MiB);
    assert.equal(shaper.tenants, 1, "past the bound, only the tenant still paying is kept");
    assert.equal(shaper.take("late", MiB), 2000, "with its debt");
  });

  it("reads a tenant alone at full speed and charges it nothing, so it finds a full burst once shared", async () => {
    const clock = new ManualClock();
    const shaper = new TenantIngressShaper(MiB, MiB, clock);
    shaper.served("a");
    for (let i = 0; i < 4; i++) assert.equal(shaper.take("a", 64 * MiB), 0, "no other tenant: nobody waits for it");
    assert.equal(shaper.tenants, 0, "and nothing is owed");
    shaper.served("b");
    assert.equal(shaper.take("a", MiB), 0);
    assert.equal(shaper.take("a", MiB), 0, "its burst is whole");
    assert.equal(shaper.take("a", MiB), 1000, "then the rate holds");
  });

  it("stops shaping once no other tenant has made a request for the shared window", async () => {
    const clock = new ManualClock();
    const shaper = new TenantIngressShaper(MiB, MiB, clock);
    shaper.served("b");
    shaper.served("a");
    assert.equal(shaper.sharedWith("a", clock.now().getTime()), true);
    assert.equal(shaper.take("a", 4 * MiB), 0);
    assert.equal(shaper.take("a", MiB), 3000);
    await clock.advance(SHARED_FOR_MS - 1);
    shaper.served("a");
    assert.equal(shaper.sharedWith("a", clock.now().getTime()), true, "b's request is still within the window");
    await clock.advance(1);
    assert.equal(shaper.sharedWith("a", clock.now().getTime()), false, "a's own requests do not make it shared");
    assert.equal(shaper.take("a", 64 * MiB), 0, "alone again: read at once, its debt forgiven");
  });

  it("tells each tenant when another was last served, from the last two tenants seen", async () => {
    const clock = new ManualClock();
    const shaper = new TenantIngressShaper(MiB, MiB, clock);
    const now = () => clock.now().getTime();
    assert.equal(shaper.sharedWith("a", now()), false, "nobody served yet");
    shaper.served("a");
    assert.equal(shaper.sharedWith("a", now()), false);
    assert.equal(shaper.sharedWith("b", now()), true, "a tenant not yet served shares with a");
    shaper.served("b");
    await clock.advance(SHARED_FOR_MS - 1);
    shaper.served("a");
    shaper.served("a");
    assert.equal(shaper.sharedWith("a", now()), true, "b, before a's latest requests, is remembered");
    assert.equal(shaper.sharedWith("b", now()), true);
    await clock.advance(1);
    assert.equal(shaper.sharedWith("a", now()), false, "b's request has left the window");
    shaper.served("c");
    assert.equal(shaper.sharedWith("a", now()), true);
    assert.equal(shaper.sharedWith("c", now()), true, "a served a moment ago");
  });

  it("leaves the bound as it was when one of its unshared tenants is served", () => {
    const clock = new ManualClock();
    const shaper = new TenantIngressShaper(MiB, MiB, clock, ["platform"]);
    shaper.served("a");
    shaper.served("platform");
    assert.equal(shaper.sharedWith("a", clock.now().getTime()), false, "a is still alone");
    assert.equal(shaper.take("a", 64 * MiB), 0, "and read at once");
    shaper.served("b");
    assert.equal(shaper.sharedWith("a", clock.now().getTime()), true, "another tenant still makes it shared");
  });

  it("refuses a rate or burst that is not positive", () => {
    const clock = new ManualClock();
    assert.throws(() => new TenantIngressShaper(0, MiB, clock), /must be positive/);
    assert.throws(() => new TenantIngressShaper(MiB, 0, clock), /must be positive/);
  });

  it("passes a stream's bytes in order, holding what is over the rate until its time", async () => {
    const clock = new ManualClock();
    const shaper = sharedShaper(MiB, MiB, clock);
    const source = new PassThrough();
    const shaped = shaper.shape("a", source);
    const received: Buffer[] = [];
    shaped.on("data", (chunk: Buffer) => received.push(chunk));
    const ended = new Promise<void>((resolve) => shaped.on("end", resolve));
    for (let i = 0; i < 4; i++) source.write(Buffer.alloc(MiB, i));
    source.end();
    await clock.advance(0);
    assert.equal(received.length, 2, "the burst and the first chunk beyond it are read at once");
    await clock.advance(999);
    assert.equal(received.length, 2, "the third waits its full second");
    await clock.advance(1);
    assert.equal(received.length, 3);
    await clock.advance(1000);
    await ended;
    assert.deepEqual(
      received.map((chunk) => chunk[0]),
      [0, 1, 2, 3],
    );
  });

  it("fails the shaped stream when its source fails (a client gone mid-body)", async () => {
    const clock = new ManualClock();
    const shaper = sharedShaper(MiB, MiB, clock);
    const source = new PassThrough();
    const shaped = shaper.shape("a", source);
    const failed = new Promise<Error>((resolve) => shaped.on("error", resolve));
    shaped.resume();
    source.destroy(new Error("aborted"));
    assert.match((await failed).message, /aborted/);
  });
});

describe("the ingress bound's configuration", () => {
  it("is on by default, at the rate and burst T15 chose, with the platform's canaries unshared", () => {
    assert.deepEqual(configFromEnv({}).tenantIngress, DEFAULT_TENANT_INGRESS);
    assert.ok(DEFAULT_TENANT_INGRESS.bytesPerSecond > 0 && DEFAULT_TENANT_INGRESS.burstBytes > 0);
    assert.deepEqual(DEFAULT_TENANT_INGRESS.unsharedTenants, [CANARY_TENANT]);
  });

  it("takes a rate and burst from the environment, and a rate of 0 turns it off", () => {
    assert.deepEqual(
      configFromEnv({ KILN_TENANT_INGRESS_BYTES_PER_SECOND: "4194304", KILN_TENANT_INGRESS_BURST_BYTES: "65536" })
        .tenantIngress,
      { bytesPerSecond: 4194304, burstBytes: 65536, unsharedTenants: [CANARY_TENANT] },
    );
    assert.equal(configFromEnv({ KILN_TENANT_INGRESS_BYTES_PER_SECOND: "0" }).tenantIngress, undefined);
  });

  it("refuses a rate or burst that is not a whole number in range, naming the variable", () => {
    assert.throws(
      () => configFromEnv({ KILN_TENANT_INGRESS_BYTES_PER_SECOND: "-1" }),
      /KILN_TENANT_INGRESS_BYTES_PER_SECOND/,
    );
    assert.throws(
      () => configFromEnv({ KILN_TENANT_INGRESS_BYTES_PER_SECOND: "2MiB" }),
      /KILN_TENANT_INGRESS_BYTES_PER_SECOND/,
    );
    assert.throws(() => configFromEnv({ KILN_TENANT_INGRESS_BURST_BYTES: "0" }), /KILN_TENANT_INGRESS_BURST_BYTES/);
  });
});
