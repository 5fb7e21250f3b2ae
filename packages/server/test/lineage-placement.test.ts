import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { recordLineageSave, registerHost, type Storage } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { HostService } from "../src/domain/hosts/host-service.js";
import { DEFAULT_LINEAGE_AFFINITY_SECONDS } from "../src/domain/hosts/lineage-affinity.js";
import { personWithToken, testBlobs } from "../src/testing/harness.js";
import { acceptJob } from "../src/testing/job-fixtures.js";
import { inProcessHostProtocol } from "../src/web/host-protocol/in-process-host-protocol.js";

/**
 * The host service places by lineage with the configured wait (storage's claim verb has the
 * per-dialect cases): a job whose lineage host-a holds is not given to host-b while host-a is
 * live, until the wait has passed since the job was queued; with a wait of 0 it is given at once.
 */
for (const dialect of DIALECTS) {
  describe(`the host service places by lineage (${dialect.name})`, { skip: dialect.skip }, () => {
    let storage: Storage;
    before(async () => {
      storage = await dialect.openFresh();
    });
    after(() => storage.close());

    async function setUp(clock: ManualClock) {
      const owner = await personWithToken(storage, { role: "owner", now: clock.now() });
      for (const id of ["host-a", "host-b"]) {
        await registerHost(storage, { id, vcpus: 16, memoryBytes: 2 ** 36, isolation: "sandbox", now: clock.now() });
      }
      await recordLineageSave(storage, {
        tenantId: owner.tenant,
        repository: "acme/widget",
        class: "test:stable:kiln2-cpu",
        lineage: `lin_${owner.tenant}`,
        host: "host-a",
        bytes: 2 ** 30,
        generation: 1,
        rootGeneration: 1,
        now: clock.now(),
        quotaBytes: 2 ** 40,
      });
      return acceptJob(storage, { tenant: owner.tenant, now: clock.now() });
    }

    const protocolOf = (clock: ManualClock, lineageAffinitySeconds?: number) =>
      inProcessHostProtocol(
        new HostService({
          storage,
          blobs: testBlobs(),
          clock,
          log: silentLogger,
          ...(lineageAffinitySeconds === undefined ? {} : { lineageAffinitySeconds }),
        }),
      );

    it(`by default a job waits ${DEFAULT_LINEAGE_AFFINITY_SECONDS} s for its live lineage host, then another host takes it`, async () => {
      const clock = new ManualClock("2026-11-26T09:00:00.000Z");
      const job = await setUp(clock);
      const protocol = protocolOf(clock);
      assert.equal(await protocol.claim("host-b", 16), null);
      await clock.advance((DEFAULT_LINEAGE_AFFINITY_SECONDS - 1) * 1000);
      assert.equal(await protocol.claim("host-b", 16), null);
      await clock.advance(1000);
      assert.equal((await protocol.claim("host-b", 16))?.jobId, job.id);
    });

    it("with KILN_LINEAGE_AFFINITY_SECONDS=0 another host takes it at once", async () => {
      const clock = new ManualClock("2026-11-26T10:00:00.000Z");
      const job = await setUp(clock);
      assert.equal((await protocolOf(clock, 0).claim("host-b", 16))?.jobId, job.id);
    });
  });
}
