import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { LogShipper } from "../src/agent/attempt/log-shipper.js";
import type { HostProtocol, LogLine } from "../src/agent/host-protocol.js";

const REF = { jobId: "job_ship", attempt: 1, leaseToken: "lease" };

describe("the log shipper", () => {
  it("ships lines that pile up behind a slow shipment in bounded batches, all of them, in order", async () => {
    // A test printing 5,000 lines re-run twice: 15,000 lines pushed while the first shipment was
    // in flight became one shipment of 10,041 lines that SQLite refused, kept and re-sent forever.
    const shipments: (readonly LogLine[])[] = [];
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const protocol = {
      appendLogs: async (_ref: unknown, lines: readonly LogLine[]) => {
        shipments.push(lines);
        await held;
        return "accepted";
      },
    } as unknown as HostProtocol;
    const shipper = new LogShipper(protocol, REF, new ManualClock(), { log: silentLogger, emit: () => {} });
    for (let i = 0; i < 15_000; i++) shipper.push("stdout", `noise line ${i}`);
    release();
    await shipper.flush();
    assert.deepEqual(
      shipments.flat().map((l) => l.text),
      Array.from({ length: 15_000 }, (_, i) => `noise line ${i}`),
      "every line, once, in order",
    );
    const largest = Math.max(...shipments.map((s) => s.length));
    assert.ok(largest <= 500, `each shipment is a bounded batch (largest: ${largest} lines)`);
    assert.equal(shipments.length, 30);
  });
});
