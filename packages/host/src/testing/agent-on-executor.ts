import { type Clock, silentLogger } from "@kiln/contract";
import { cargoOutputObserver } from "../agent/cargo-output-observer.js";
import { HostAgent } from "../agent/host-agent.js";
import type { HostReporting } from "../agent/host-events.js";
import type { HostProtocol } from "../agent/host-protocol.js";
import type { LineageStore } from "../agent/lineage-store.js";
import type { Executor } from "../executor/executor.js";
import { sandboxIsolation } from "../executor/sandbox/sandbox-isolation.js";

/**
 * A host agent on `protocol` and `clock` running its attempts on `executor` (an in-memory one)
 * behind the sandbox's housekeeping (its attempts' directories removed as the sandbox removes
 * them), with a toolchain that resolves to nothing, polling every 500 ms and beating every 2 s.
 * For the tests of what the agent does around an attempt; `emit` sees what it reports.
 */
export function agentOnExecutor(
  protocol: HostProtocol,
  clock: Clock,
  opts: {
    hostId: string;
    executor: Executor;
    workRoot: string;
    vcpus: number;
    memoryBytes: number;
    emit: HostReporting["emit"];
    lineages?: LineageStore;
  },
): HostAgent {
  return new HostAgent({
    hostId: opts.hostId,
    protocol,
    isolation: sandboxIsolation({ executor: opts.executor, clock }),
    clock,
    reporting: { log: silentLogger, emit: opts.emit },
    resolveToolchain: async (name) => ({ name, path: "/nonexistent/toolchain" }),
    newObserver: cargoOutputObserver,
    workRoot: opts.workRoot,
    ...(opts.lineages === undefined ? {} : { lineages: opts.lineages }),
    vcpus: opts.vcpus,
    memoryBytes: opts.memoryBytes,
    pollMs: 500,
    heartbeatSeconds: 2,
  });
}
