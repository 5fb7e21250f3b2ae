import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { claimNextJob, createTenant, LocalBlobStore, registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { sql } from "kysely";
import { canarySettings } from "../src/domain/platform/canaries/canary-settings.js";
import { HOST_FRESH_SECONDS } from "../src/domain/platform/host-serving.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { acceptJob } from "../src/testing/job-fixtures.js";

const HOST = "states-host";

import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/**
 * operator.platform.states from measurements: liveness; readiness from the database, its
 * migrations and the blob store; execution capacity from the hosts' rows and what runs on them
 * (serving, seen lately, free vCPUs per size); each state's computation instant, typed reason and,
 * when refusing, a deadline. Workload health's canary reasons are in canaries.sandbox.test.ts.
 */
for (const dialect of DIALECTS) {
  describe(`operating states (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;

    before(async () => {
      t = await testApp(await dialect.openFresh());
      operator = await operatorClient(t.app, t.storage, t.clock.now());
    });
    after(() => t.close());

    /** The host takes `jobId` (the oldest queued job), with the free vCPUs it has left. */
    const place = async (jobId: string) => {
      const free = (await states()).hosts[0].vcpus_free;
      const placed = await claimNextJob(t.storage, {
        hostId: HOST,
        freeVcpus: free,
        vcpusOfSize: VCPUS_OF_SIZE,
        leaseSeconds: 60,
        now: t.clock.now(),
      });
      assert.equal(placed?.job.id, jobId);
    };
    const states = async () => {
      const r = await operator.get("/operator/api/platform/states");
      assert.equal(r.statusCode, 200, r.body);
      return r.json();
    };

    it("with no host: live and ready, but no capacity and no workload health, each with a deadline", async () => {
      const s = await states();
      const now = t.clock.now().toISOString();
      assert.deepEqual(
        [s.management_liveness.state, s.management_liveness.reason.code, s.management_liveness.computed_at],
        ["ok", "answering", now],
      );
      assert.equal(s.management_liveness.deadline, null);
      assert.deepEqual([s.management_readiness.state, s.management_readiness.reason.code], ["ok", "ready"]);
      assert.deepEqual([s.execution_capacity.state, s.execution_capacity.reason.code], ["refusing", "no_serving_host"]);
      assert.ok(Date.parse(s.execution_capacity.deadline) > Date.parse(now));
      assert.deepEqual(
        [s.end_to_end_workload_health.state, s.end_to_end_workload_health.reason.code],
        ["refusing", "no_serving_host"],
      );
      assert.deepEqual(s.hosts, []);
    });

    it("execution capacity counts serving hosts' free vCPUs per size, with each host's observation", async () => {
      await registerHost(t.storage, {
        id: HOST,
        vcpus: 6,
        memoryBytes: 12 * 2 ** 30,
        isolation: "sandbox",
        now: t.clock.now(),
      });
      const s = await states();
      assert.deepEqual([s.execution_capacity.state, s.execution_capacity.reason.code], ["ok", "capacity_available"]);
      assert.deepEqual(s.execution_capacity.free_slots_by_size, {
        "kiln2-cpu": 3,
        "kiln4-cpu": 1,
        "kiln8-cpu": 0,
        "kiln16-cpu": 0,
      });
      const [host] = s.hosts;
      assert.equal(host.host, HOST);
      assert.equal(host.admitting, true);
      assert.equal(host.vcpus_total, 6);
      assert.equal(host.vcpus_free, 6);
      assert.equal(host.observed_at, t.clock.now().toISOString());
      assert.equal(
        s.end_to_end_workload_health.reason.code,
        "canary_pending",
        "a serving host whose canary has not run yet",
      );

      // Two kiln2 jobs run on it: 2 vCPUs left, one kiln2 slot.
      await createTenant(t.storage, { id: "acme-states" }, t.clock.now());
      for (let i = 0; i < 2; i++) {
        const job = await acceptJob(t.storage, { tenant: "acme-states", now: t.clock.now() });
        await place(job.id);
      }
      const busy = await states();
      assert.equal(busy.hosts[0].vcpus_free, 2);
      assert.equal(busy.hosts[0].running_attempts, 2);
      assert.equal(busy.hosts[0].memory_bytes_free, 4 * 2 ** 30);
      assert.deepEqual(busy.execution_capacity.free_slots_by_size["kiln2-cpu"], 1);
      const third = await acceptJob(t.storage, { tenant: "acme-states", now: t.clock.now() });
      await place(third.id);
      const full = await states();
      assert.deepEqual(
        [full.execution_capacity.state, full.execution_capacity.reason.code],
        ["refusing", "no_free_capacity"],
      );
      assert.ok(full.execution_capacity.deadline);
    });

    it("a host not seen for longer than the freshness bound is not serving, naming why", async () => {
      // Its attempts' leases (60 s in the fixture) have lapsed too by then.
      await t.clock.advance((HOST_FRESH_SECONDS + 61) * 1000);
      const s = await states();
      assert.equal(s.hosts[0].admitting, false);
      assert.match(s.hosts[0].reason, /not seen for over/);
      assert.equal(s.execution_capacity.reason.code, "no_serving_host");
      await registerHost(t.storage, {
        id: HOST,
        vcpus: 6,
        memoryBytes: 12 * 2 ** 30,
        isolation: "sandbox",
        now: t.clock.now(),
      });
      assert.equal((await states()).hosts[0].admitting, true, "seen again");
    });

    it("readiness refuses when the schema is behind this build, naming the migration", async () => {
      const newest = await sql<{ name: string }>`select max(name) as name from kysely_migration`.execute(t.storage.db);
      const name = newest.rows[0]?.name ?? "";
      await sql`delete from kysely_migration where name = ${name}`.execute(t.storage.db);
      try {
        const s = await states();
        assert.deepEqual(
          [s.management_readiness.state, s.management_readiness.reason.code],
          ["refusing", "migrations_pending"],
        );
        assert.match(s.management_readiness.reason.detail, new RegExp(name));
        assert.ok(s.management_readiness.deadline);
      } finally {
        await sql`insert into kysely_migration (name, timestamp) values (${name}, ${t.clock.now().toISOString()})`.execute(
          t.storage.db,
        );
      }
      assert.equal((await states()).management_readiness.reason.code, "ready");
    });
  });
}

describe("operating states: an unwritable blob store", () => {
  it("readiness refuses with blob_store_unwritable", async () => {
    const [dialect] = DIALECTS;
    assert.ok(dialect);
    const t = await testApp(await dialect.openFresh(), { blobs: new LocalBlobStore("/nonexistent/kiln-blobs") });
    try {
      const operator = await operatorClient(t.app, t.storage, t.clock.now());
      const r = await operator.get("/operator/api/platform/states");
      assert.equal(r.statusCode, 200, r.body);
      assert.deepEqual(
        [r.json().management_readiness.state, r.json().management_readiness.reason.code],
        ["refusing", "blob_store_unwritable"],
      );
    } finally {
      await t.close();
    }
  });
});

describe("operating states: canaries off in this deployment", () => {
  it("workload health says it is not measured, with no deadline, and the console shows it off", async () => {
    const [dialect] = DIALECTS;
    assert.ok(dialect);
    const t = await testApp(await dialect.openFresh(), { canaries: canarySettings({ off: true }) });
    try {
      const operator = await operatorClient(t.app, t.storage, t.clock.now());
      const r = await operator.get("/operator/api/platform/states");
      assert.equal(r.statusCode, 200, r.body);
      const health = r.json().end_to_end_workload_health;
      assert.deepEqual([health.state, health.reason.code, health.deadline], ["ok", "canaries_off", null]);
      assert.match(health.reason.detail, /not measured: canaries are off/);
      const page = await operator.get("/operator");
      assert.equal(page.statusCode, 200, page.body);
      assert.match(
        page.body,
        /<span class="status status-off">off<\/span><\/span><\/td><td><code>canaries_off<\/code>/,
      );
    } finally {
      await t.close();
    }
  });
});
