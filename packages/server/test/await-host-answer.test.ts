import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Clock } from "@kiln/contract";
import { registerHost, type Storage } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { awaitHostAnswer, HOST_ANSWER_WAIT_SECONDS } from "../src/domain/hosts/fleet/await-host-answer.js";

/**
 * A clock that reads `start` until the read is recorded, then has moved the whole wait on, as a
 * test (or a slow database) moves it while the insert is still in flight; its sleeps resolve at
 * once, and there are at most `sleeps` of them (a wait that never ends fails instead of hanging).
 */
function clockMovingDuringTheInsert(start: Date, sleeps: number) {
  let reads = 0;
  let slept = 0;
  const clock: Clock = {
    now: () => {
      reads += 1;
      return new Date(start.getTime() + (reads > 1 ? HOST_ANSWER_WAIT_SECONDS * 1000 : 0));
    },
    after: () => ({ cancel: () => {} }),
    sleep: async () => {
      slept += 1;
      if (slept > sleeps) throw new Error(`still waiting after ${sleeps} looks: the deadline moved with the clock`);
    },
  };
  return clock;
}

for (const dialect of DIALECTS) {
  describe(`a host read's wait (${dialect.name})`, { skip: dialect.skip }, () => {
    let storage: Storage;
    const start = new Date("2026-11-25T06:00:00.000Z");

    before(async () => {
      storage = await dialect.openFresh();
      await registerHost(storage, { id: "quiet", vcpus: 2, memoryBytes: 2 ** 32, isolation: "sandbox", now: start });
    });
    after(() => storage.close());

    it("is counted from the request: a clock that moves the whole wait on during the insert expires it", async () => {
      const state = await awaitHostAnswer(
        { storage, clock: clockMovingDuringTheInsert(start, 3) },
        { hostId: "quiet", kind: "journal", path: null, maxBytes: 1024, requestedBy: "operator:test" },
      );
      assert.equal(state.kind, "expired");
    });
  });
}
