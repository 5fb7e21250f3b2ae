import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { HostInitializationReport } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { type HostProtocol, type InitializationStep, runHostInitialization } from "../src/index.js";

/**
 * The host's run of an initialization (run-host-initialization.ts): steps in order, the ledger
 * reported as each starts and ends, later steps skipped after a failure, and a stop as soon as
 * the control plane says the operation is not the host's open one any more.
 */
describe("a host initialization run", () => {
  const order = { operation: "init-1", toolchains: ["stable"] };
  const ran: string[] = [];
  // A host's own steps, in its order (a sandbox host's names; a microVM host's differ).
  const steps: InitializationStep[] = [
    {
      name: "sandbox_user",
      run: async () => {
        ran.push("sandbox_user");
        return "user ok";
      },
    },
    {
      name: "bubblewrap",
      run: async () => {
        ran.push("bubblewrap");
        throw new Error("bubblewrap could not start a sandbox: no user namespaces");
      },
    },
    {
      name: "cgroup_delegation",
      run: async () => {
        ran.push("cgroup_delegation");
        return "cgroup ok";
      },
    },
    {
      name: "toolchains",
      run: async (order) => {
        ran.push(`toolchains ${order.toolchains.join(",")}`);
        return "toolchains ok";
      },
    },
  ];
  const protocolAnswering = (answer: (report: HostInitializationReport) => "accepted" | "stale") => {
    const reports: HostInitializationReport[] = [];
    const protocol = {
      reportInitialization: async (report: HostInitializationReport) => {
        reports.push(structuredClone(report));
        return answer(report);
      },
    } as unknown as HostProtocol;
    return { protocol, reports };
  };

  it("a failed step fails with its reason and leaves the later steps skipped, never run", async () => {
    ran.length = 0;
    const { protocol, reports } = protocolAnswering(() => "accepted");
    const end = await runHostInitialization({ hostId: "h", protocol, clock: new ManualClock(), steps }, order);
    assert.equal(end, "finished");
    assert.deepEqual(ran, ["sandbox_user", "bubblewrap"]);
    const last = reports.at(-1);
    assert.deepEqual(
      last?.steps.map((s) => [s.step, s.state]),
      [
        ["sandbox_user", "succeeded"],
        ["bubblewrap", "failed"],
        ["cgroup_delegation", "skipped"],
        ["toolchains", "skipped"],
      ],
    );
    assert.match(last?.steps[1]?.detail ?? "", /no user namespaces/);
    assert.equal(last?.steps[2]?.detail, "not run: step bubblewrap failed");
    // One report as each step starts, and the final ledger.
    assert.deepEqual(
      reports.map((r) => r.steps.filter((s) => s.state === "running").map((s) => s.step)),
      [["sandbox_user"], ["bubblewrap"], []],
    );
  });

  it("stops as soon as the control plane answers stale", async () => {
    ran.length = 0;
    const { protocol, reports } = protocolAnswering(() => "stale");
    const end = await runHostInitialization({ hostId: "h", protocol, clock: new ManualClock(), steps }, order);
    assert.equal(end, "stale");
    assert.deepEqual(ran, [], "no step runs once the operation is not the host's");
    assert.equal(reports.length, 1);
  });
});
