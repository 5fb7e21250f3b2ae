import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type AttemptClaim, type AttemptClaimAnswer, CLAIM_MAX_WAIT_MS } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import type { HostProtocol } from "../src/index.js";
import { agentWithoutExecutor } from "../src/testing/index.js";

/** One long-poll claim the agent made, held until the test answers it (or the agent takes it back). */
interface HeldClaim {
  readonly request: AttemptClaim;
  readonly withdraw: AbortSignal;
  answer(answer: AttemptClaimAnswer): void;
}

/**
 * A binding that offers the long-poll and answers nothing by itself: every claim is held until
 * the test answers it; one taken back rejects, as the HTTP binding's does before an answer.
 */
function holdingProtocol() {
  const claims: HeldClaim[] = [];
  let polls = 0;
  const protocol = {
    enroll: async () => {},
    acknowledgeCredentials: async () => {},
    claim: async () => {
      polls += 1;
      return null;
    },
    claimWaiting: (request: AttemptClaim, withdraw: AbortSignal) =>
      new Promise<AttemptClaimAnswer>((resolve, reject) => {
        withdraw.addEventListener("abort", () => reject(new Error("withdrawn")), { once: true });
        claims.push({ request, withdraw, answer: resolve });
      }),
  } as unknown as HostProtocol;
  return { protocol, claims, polls: () => polls };
}

function agentOn(protocol: HostProtocol, clock: ManualClock) {
  return agentWithoutExecutor(protocol, clock, { hostId: "long-poll-test" });
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** Waits for a condition the agent reaches through its own promises (no clock involved). */
async function eventually(condition: () => boolean): Promise<void> {
  for (let turns = 0; !condition(); turns += 1) {
    if (turns > 10_000) assert.fail("condition not reached");
    await settle();
  }
}

describe("the host agent's long-poll claim", () => {
  it("keeps one claim waiting from the start, asks again at once when a wait ends empty, and never polls", async () => {
    const { protocol, claims, polls } = holdingProtocol();
    const clock = new ManualClock();
    const agent = agentOn(protocol, clock);
    await agent.start();
    await settle();
    assert.equal(claims.length, 1, "a waiting claim from the start, with no clock advanced");
    assert.deepEqual(claims[0]?.request, { hostId: "long-poll-test", freeVcpus: 4, waitMs: CLAIM_MAX_WAIT_MS });
    agent.wake(); // a wake while it waits adds nothing: the control plane wakes the waiting claim
    await settle();
    assert.equal(claims.length, 1);
    claims[0]?.answer({ placement: null, idle: "wait_ended" });
    await settle();
    assert.equal(claims.length, 2, "the next wait begins at once");
    await clock.advance(10_000);
    await settle();
    assert.equal(claims.length, 2, "its poll clock starts no claim beside the waiting one");
    assert.equal(polls(), 0, "the immediate claim is never used");
    await agent.stop();
    assert.equal(claims[1]?.withdraw.aborted, true, "stopping takes the waiting claim back");
  });

  it("a host told it takes no work (drained) asks again after its poll interval, not at once", async () => {
    const { protocol, claims } = holdingProtocol();
    const clock = new ManualClock();
    const agent = agentOn(protocol, clock);
    await agent.start();
    await settle();
    claims[0]?.answer({ placement: null, idle: "not_admitting" });
    await settle();
    assert.equal(claims.length, 1, "no claim at once after not_admitting");
    await clock.advance(500);
    await settle();
    assert.equal(claims.length, 2, "the poll asks again");
    claims[1]?.answer({ placement: null, idle: "wait_ended" });
    await settle();
    assert.equal(claims.length, 3);
    await agent.stop();
  });

  it("takes a waiting claim back only when more vCPUs are free than it asked for, and asks again with them", async () => {
    const { protocol, claims } = holdingProtocol();
    const clock = new ManualClock();
    const ended: string[] = [];
    // The attempt cannot run here (no work root): it ends at once in an error, freeing its vCPUs.
    const agent = agentWithoutExecutor(protocol, clock, {
      hostId: "long-poll-test",
      emit: (event) => ended.push(event.type),
    });
    await agent.start();
    await settle();
    // A placement of two vCPUs: the next claim asks for the two left. Its attempt cannot run
    // here (no work root, no executor): it ends in an error, frees its vCPUs and wakes the agent.
    claims[0]?.answer({
      placement: { jobId: "job-1", attempt: 1, leaseToken: "lease", limits: { vcpus: 2 } },
      idle: null,
    } as unknown as AttemptClaimAnswer);
    await eventually(() => claims.length === 3);
    assert.equal(claims[1]?.request.freeVcpus, 2, "the claim after the placement asked for what was left");
    assert.equal(claims[1]?.withdraw.aborted, true, "taken back once the attempt's vCPUs were freed");
    assert.equal(claims[2]?.request.freeVcpus, 4, "and asked again with all of them");
    assert.equal(claims[2]?.withdraw.aborted, false);
    assert.ok(ended.includes("attempt:error"));
    await agent.stop();
  });

  it("a claim that failed is reported and retried on the poll", async () => {
    const events: string[] = [];
    let calls = 0;
    const protocol = {
      enroll: async () => {},
      acknowledgeCredentials: async () => {},
      claim: async () => null,
      claimWaiting: async () => {
        calls += 1;
        throw new Error("connection refused");
      },
    } as unknown as HostProtocol;
    const clock = new ManualClock();
    const agent = agentWithoutExecutor(protocol, clock, {
      hostId: "long-poll-test",
      vcpus: 2,
      emit: (event) => events.push(event.type),
    });
    await agent.start();
    await settle();
    assert.deepEqual([calls, events], [1, ["claim:error"]]);
    await settle();
    assert.equal(calls, 1, "not retried in a tight loop");
    await clock.advance(500);
    await settle();
    assert.equal(calls, 2, "retried on the poll");
    await agent.stop();
  });
});
