import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import type { HostProtocol } from "../src/index.js";
import { agentWithoutExecutor } from "../src/testing/index.js";

describe("the host agent's claim loop", () => {
  it("claims again when woken while a claim is under way, instead of leaving the job to the next poll", async () => {
    const answers: ((placement: null) => void)[] = [];
    const protocol = {
      enroll: async () => {},
      acknowledgeCredentials: async () => {},
      claim: () => new Promise<null>((resolve) => answers.push(resolve)),
    } as unknown as HostProtocol;
    const clock = new ManualClock();
    const agent = agentWithoutExecutor(protocol, clock, { hostId: "wake-test", vcpus: 2 });
    await agent.start();
    const settle = () => new Promise((resolve) => setImmediate(resolve));

    agent.wake(); // a submission: the claim reads the queue…
    await settle();
    assert.equal(answers.length, 1);
    agent.wake(); // …and another job is committed before that claim answers
    await settle();
    assert.equal(answers.length, 1, "one claim at a time");
    answers[0]?.(null); // the first claim missed the second job
    await settle();
    assert.equal(answers.length, 2, "the wake was kept: a second claim runs at once, with no clock advanced");
    answers[1]?.(null);
    await settle();
    assert.equal(answers.length, 2, "and no more than that");
    await agent.stop();
  });
});
