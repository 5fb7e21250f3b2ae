import { type Clock, silentLogger } from "@kiln/contract";
import { HostAgent } from "../agent/host-agent.js";
import type { HostProtocol } from "../agent/host-protocol.js";

/**
 * A host agent of `vcpus` (4 unless given) on `protocol` and `clock` with no executor behind it:
 * an attempt it is handed ends at once in an error, freeing its vCPUs. For the tests of its claim
 * loop; `emit` sees what it reports.
 */
export function agentWithoutExecutor(
  protocol: HostProtocol,
  clock: Clock,
  opts: { hostId: string; vcpus?: number; emit?: (event: { type: string }) => void },
): HostAgent {
  return new HostAgent({
    hostId: opts.hostId,
    protocol,
    clock,
    reporting: { log: silentLogger, emit: opts.emit ?? (() => {}) },
    isolation: {
      choice: { isolation: "sandbox", requested: "sandbox", reason: "test" },
      executor: { isolation: "sandbox" },
    },
    vcpus: opts.vcpus ?? 4,
    memoryBytes: 2 ** 30,
  } as unknown as ConstructorParameters<typeof HostAgent>[0]);
}
