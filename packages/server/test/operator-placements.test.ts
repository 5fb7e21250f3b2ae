import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rmdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setImmediate as nextTurn } from "node:timers/promises";
import { silentLogger } from "@kiln/contract";
import {
  AttemptCgroup,
  attemptReaper,
  detectCgroupLayout,
  FleetChannel,
  type HostProtocol,
  parseProcessCgroups,
  sandboxIsolation,
} from "@kiln/host";
import { claimNextJob, createTenant, readJobStatus, registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { LEASE_SECONDS } from "../src/domain/hosts/attempt-lease.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { hostProtocolOf, type TestApp, testApp } from "../src/testing/harness.js";
import { acceptJob } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/** This process's own cgroups, as the host agent reads them. */
const readOwnCgroups = async () => parseProcessCgroups(await readFile("/proc/self/cgroup", "utf8"));

interface PlacementView {
  job_id: string;
  vm_id: string;
  host: string;
  state: string;
  flagged: boolean;
  flag_reason: string | null;
  flags: string[];
  lease_expires_at: string | null;
}

/**
 * operator.placements.list / reconcile / receipt through the HTTP routes with an operator
 * session. Placements are real leased attempts (the storage claim verb, as a host's claim
 * makes them); staleness is moved on the injected clock; an orphaned sandbox is one a host
 * reports in its fleet poll (the in-process host protocol) with no live attempt behind it.
 */
for (const dialect of DIALECTS) {
  describe(`operator placements (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;
    let host: HostProtocol;
    const tenant = "acme-placements";

    before(async () => {
      t = await testApp(await dialect.openFresh());
      // Listening, as a real control plane is: the clock's timers a request waits on for a host's
      // answer do not keep the process alive by themselves.
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      await createTenant(t.storage, { id: tenant }, t.clock.now());
      for (const id of ["builder-1", "builder-2"]) {
        await registerHost(t.storage, {
          id,
          vcpus: 64,
          memoryBytes: 2 ** 37,
          isolation: "sandbox",
          now: t.clock.now(),
        });
      }
      host = hostProtocolOf({ storage: t.storage, blobs: t.deps.blobs, clock: t.clock });
      operator = await operatorClient(t.app, t.storage, t.clock.now());
    });
    after(() => t.close());

    const placements = async () => {
      const r = await operator.get("/operator/api/placements");
      assert.equal(r.statusCode, 200, r.body);
      return r.json() as PlacementView[];
    };
    const claim = (hostId: string) =>
      claimNextJob(t.storage, {
        hostId,
        freeVcpus: 64,
        vcpusOfSize: VCPUS_OF_SIZE,
        leaseSeconds: LEASE_SECONDS,
        now: t.clock.now(),
      });

    it("without an operator session the placement operations answer operator_not_found", async () => {
      for (const [method, url] of [
        ["GET", "/operator/api/placements"],
        ["GET", "/operator/api/placements/j/j-a1/receipt"],
        ["POST", "/operator/api/placements/j/j-a1/reconcile"],
      ] as const) {
        const r = await t.app.inject({
          method,
          url,
          headers: { "sec-fetch-site": "same-origin", "content-type": "application/json" },
          ...(method === "POST" ? { payload: JSON.stringify({ category: "stale_lease", mutation: "requeue" }) } : {}),
        });
        assert.equal(r.statusCode, 404, `${method} ${url}`);
        assert.equal(r.json().code, "operator_not_found");
      }
    });

    it("lists live placements with host, job and VM id, flagged first once a heartbeat goes stale", async () => {
      const older = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      const olderPlaced = await claim("builder-1");
      assert.equal(olderPlaced?.job.id, older.id);
      await t.clock.advance(1000);
      const newer = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      assert.equal((await claim("builder-2"))?.job.id, newer.id);

      const fresh = await placements();
      assert.deepEqual(
        fresh.map((p) => [p.job_id, p.vm_id, p.host, p.state, p.flagged]),
        [
          [older.id, `${older.id}-a1`, "builder-1", "running", false],
          [newer.id, `${newer.id}-a1`, "builder-2", "running", false],
        ],
      );

      // builder-2 renews its lease (a heartbeat); builder-1 does not, and goes stale.
      await t.clock.advance(9000);
      const ref = await claimedRef(newer.id);
      assert.equal(await host.heartbeat(ref), "continue");
      await t.clock.advance(2000);
      const later = await placements();
      assert.deepEqual(
        later.map((p) => [p.job_id, p.flagged, p.flags]),
        [
          [older.id, true, ["stale_heartbeat"]],
          [newer.id, false, []],
        ],
        "the stale placement comes first",
      );
      assert.match(later[0]?.flag_reason ?? "", /stale heartbeat: host builder-1 last renewed the lease 12s ago/);
    });

    /** The lease reference a host holds for a job's running attempt. */
    async function claimedRef(jobId: string) {
      const row = await t.storage.db
        .selectFrom("attempts")
        .select(["number", "lease_token"])
        .where("job_id", "=", jobId)
        .where("state", "=", "running")
        .executeTakeFirstOrThrow();
      return { jobId, attempt: row.number, leaseToken: row.lease_token };
    }

    it("reconcile stale_lease/requeue hands a stale placement's job back, fenced on the lease read, and writes a paged reap receipt", async () => {
      const [stale, healthy] = await placements();
      assert.ok(stale?.flagged && healthy !== undefined && !healthy.flagged);
      const url = (p: PlacementView) => `/operator/api/placements/${p.job_id}/${p.vm_id}/reconcile`;

      const unknownPair = await operator.post(url(stale), { category: "orphan", mutation: "requeue" });
      assert.equal(unknownPair.statusCode, 400);
      assert.equal(unknownPair.json().code, "invalid_request");
      assert.match(unknownPair.json().detail, /admitted: stale_lease\/requeue/);
      const noLease = await operator.post(url(stale), { category: "stale_lease", mutation: "requeue" });
      assert.equal(noLease.statusCode, 400);
      assert.match(noLease.json().detail, /expected_lease_expires_at is required/);
      const wrongVm = await operator.post(`/operator/api/placements/${stale.job_id}/other-a1/reconcile`, {
        category: "stale_lease",
        mutation: "requeue",
        expected_lease_expires_at: stale.lease_expires_at,
      });
      assert.equal(wrongVm.statusCode, 400);

      const notStale = await operator.post(url(healthy), {
        category: "stale_lease",
        mutation: "requeue",
        expected_lease_expires_at: healthy.lease_expires_at,
      });
      assert.equal(notStale.statusCode, 409, "a placement whose heartbeat is fresh is not reconciled");
      assert.match(notStale.json().detail, /not stale/);

      // The state moved since the read: the host renewed the lease after all.
      const ref = await claimedRef(stale.job_id);
      assert.equal(await host.heartbeat(ref), "continue");
      const moved = await operator.post(url(stale), {
        category: "stale_lease",
        mutation: "requeue",
        expected_lease_expires_at: stale.lease_expires_at,
      });
      assert.equal(moved.statusCode, 409);
      assert.equal(moved.json().code, "conflict");
      assert.match(moved.json().detail, /its host renewed it/);
      assert.equal(await readJobStatus(t.storage, { tenantId: tenant, jobId: stale.job_id }), "running");

      await t.clock.advance(11_000);
      const reread = (await placements()).find((p) => p.job_id === stale.job_id);
      assert.ok(reread?.flagged);
      const done = await operator.post(url(reread), {
        category: "stale_lease",
        mutation: "requeue",
        expected_lease_expires_at: reread.lease_expires_at,
        note: "host wedged",
      });
      assert.equal(done.statusCode, 200, done.body);
      assert.equal(done.json().outcome, "requeued");
      assert.equal(done.json().category, "stale_lease");
      assert.match(done.json().reconciled_by, /^operator/);
      assert.equal(await readJobStatus(t.storage, { tenantId: tenant, jobId: stale.job_id }), "queued");
      assert.equal(await host.heartbeat(ref), "stale", "the host's next heartbeat for the lost attempt is stale");
      assert.ok(!(await placements()).some((p) => p.vm_id === stale.vm_id), "no longer a live placement");

      const again = await operator.post(url(reread), {
        category: "stale_lease",
        mutation: "requeue",
        expected_lease_expires_at: reread.lease_expires_at,
      });
      assert.equal(again.statusCode, 409);
      assert.match(again.json().detail, /is lost now/);

      const receipt = await operator.get(`/operator/api/placements/${stale.job_id}/${stale.vm_id}/receipt`);
      assert.equal(receipt.statusCode, 200, receipt.body);
      assert.equal(receipt.json().receipt, done.json().receipt);
      assert.equal(receipt.json().page, 1);
      assert.equal(receipt.json().next_page, null);
      assert.deepEqual(
        receipt.json().entries.map((e: { kind: string }) => e.kind),
        ["attempt_lost", "job_requeued", "metering_closed"],
      );
      const past = await operator.get(`/operator/api/placements/${stale.job_id}/${stale.vm_id}/receipt?page=2`);
      assert.deepEqual(past.json().entries, []);
      const none = await operator.get(`/operator/api/placements/${healthy.job_id}/${healthy.vm_id}/receipt`);
      assert.equal(none.statusCode, 404);
      assert.equal(none.json().code, "operator_not_found");

      const detail = (await operator.get("/operator/api/hosts/builder-1")).json();
      assert.equal(detail.receipts[0].kind, "reap");
      assert.equal(detail.receipts[0].vm_id, stale.vm_id);

      const audit = (await operator.audit()).filter((e) => e.operation === "operator.placements.reconcile");
      assert.deepEqual(
        audit.map((e) => e.outcome),
        ["conflict", "performed", "conflict", "conflict"],
        "every reconciliation reaching the placement is audited, refusals included, newest first",
      );
    });

    it("a sandbox a host reports with no live attempt behind it is listed as an orphaned placement, flagged first", async () => {
      const [live] = (await placements()).filter((p) => p.host === "builder-2");
      assert.ok(live !== undefined);
      // The attempt the previous test reconciled: lost, while its host may still hold its sandbox.
      const lost = await t.storage.db
        .selectFrom("attempts")
        .select(["job_id", "number"])
        .where("state", "=", "lost")
        .executeTakeFirstOrThrow();
      const orphan = `${lost.job_id}-a${lost.number}`;
      await host.fleetPoll({ hostId: "builder-1", sandboxes: [orphan] });
      await host.fleetPoll({ hostId: "builder-2", sandboxes: [live.vm_id] });
      const listed = await placements();
      assert.deepEqual(listed[0] && [listed[0].vm_id, listed[0].host, listed[0].state, listed[0].flags], [
        orphan,
        "builder-1",
        "orphaned",
        ["orphaned"],
      ]);
      assert.match(listed[0]?.flag_reason ?? "", /orphaned sandbox: host builder-1 reported it/);
      assert.ok(
        !listed.some((p) => p.state === "orphaned" && p.host === "builder-2"),
        "a reported sandbox with its live attempt is no orphan",
      );
    });

    it("reconcile orphan/reap has the reporting host kill the sandbox's processes and remove its cgroup and directories, with a receipt", async () => {
      const [orphan] = (await placements()).filter((p) => p.state === "orphaned");
      assert.ok(orphan !== undefined);
      const [live] = (await placements()).filter((p) => p.state === "running");
      assert.ok(live !== undefined);
      const reap = (p: PlacementView) =>
        operator.post(`/operator/api/placements/${p.job_id}/${p.vm_id}/reconcile`, {
          category: "orphan",
          mutation: "reap",
        });

      const notOrphan = await reap(live);
      assert.equal(notOrphan.statusCode, 409, "a live placement is not reaped as an orphan");
      assert.match(notOrphan.json().detail, /is live on host builder-2: not an orphan/);

      // What the orphan left on builder-1: a real cgroup (under a test parent) holding a running
      // process, and its attempt directory.
      const workRoot = await mkdtemp(join(tmpdir(), "kiln-orphan-"));
      await mkdir(join(workRoot, orphan.vm_id, "target"), { recursive: true });
      const parentName = `kiln-fleet-test-${process.pid}`;
      const cgroup = await AttemptCgroup.create({
        layout: await detectCgroupLayout(),
        ownCgroups: await readOwnCgroups(),
        parentName,
        attemptId: orphan.vm_id,
        limits: { vcpus: 1, memoryBytes: 2 ** 28, pids: 16, diskBytes: 2 ** 30 },
      });
      const sleeper = spawn("sleep", ["600"], { stdio: "ignore" });
      const exited = once(sleeper, "exit");
      for (const file of cgroup.procsFiles) await writeFile(file, String(sleeper.pid));

      const builder1 = new FleetChannel({
        hostId: "builder-1",
        protocol: host,
        clock: t.clock,
        steps: sandboxIsolation().initializationSteps,
        reporting: { log: silentLogger, emit: () => {} },
        // As HostAgent does: builder-1 reports the attempt directories on its disk.
        sandboxes: () => (existsSync(join(workRoot, orphan.vm_id)) ? [orphan.vm_id] : []),
        running: () => [],
        reaper: attemptReaper({ workRoot, cgroupParentName: parentName, clock: t.clock }),
      });
      let settled = false;
      const response = Promise.resolve(reap(orphan)).finally(() => {
        settled = true;
      });
      // As the host, poll until the reap is taken (or the request was refused without one).
      while (!settled && (await builder1.runOnce()).reads === 0) await nextTurn();
      const reaped = await response;
      assert.equal(reaped.statusCode, 200, reaped.body);
      assert.equal(reaped.json().outcome, "reaped");
      assert.equal(reaped.json().host, "builder-1");
      assert.deepEqual(await exited, [null, "SIGKILL"], "the sandbox's process was killed");
      for (const directory of [...cgroup.directories, join(workRoot, orphan.vm_id)]) {
        assert.equal(existsSync(directory), false, `${directory} is removed`);
      }
      const receipt = await operator.get(`/operator/api/placements/${orphan.job_id}/${orphan.vm_id}/receipt`);
      const kinds = (receipt.json().entries as { kind: string }[]).map((e) => e.kind);
      assert.ok(kinds.includes("cgroup_removed") && kinds.includes("directory_removed"), kinds.join(", "));
      assert.equal(receipt.json().receipt, reaped.json().receipt, "the orphan's newest reap receipt");
      await builder1.runOnce();
      assert.ok(!(await placements()).some((p) => p.state === "orphaned"), "its next poll reports no orphan");

      const again = await reap(orphan);
      assert.equal(again.statusCode, 409, "the state moved: no host reports the sandbox any more");
      assert.match(again.json().detail, /no host reports a sandbox/);
      // The test's cgroup parent, left once its only attempt cgroup is gone.
      await Promise.all(cgroup.directories.map((d) => rmdir(dirname(d)).catch(() => {})));
    });
  });
}
