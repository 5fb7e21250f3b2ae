import type { HostCapacityObservation } from "@kiln/storage";
import { SIZE_SHAPES, VCPUS_OF_SIZE } from "../../policy/platform-limits.js";
import { servingOf } from "../host-serving.js";
import { ESCALATION_SECONDS, type OperatingStatesDocument, operatingState } from "./operating-state.js";

/** Memory per vCPU of every size (DESIGN.md §6: 2 GiB per vCPU), for the memory an attempt holds. */
const BYTES_PER_VCPU = Math.min(...Object.values(SIZE_SHAPES).map((s) => s.memoryBytes / s.vcpus));

function freeSlotsBySize(freeVcpus: number): Record<string, number> {
  return Object.fromEntries(
    Object.entries(VCPUS_OF_SIZE).map(([size, vcpus]) => [size, Math.floor(freeVcpus / vcpus)]),
  );
}

/**
 * Execution capacity: the hosts serving (not drained, seen lately) and their free vCPUs — a
 * host's vCPUs less those its running attempts were placed with — as free slots per size, with
 * each host's observation. Refusing when no host serves, or when no serving host can place
 * even the smallest size.
 */
export function executionCapacity(
  hosts: readonly HostCapacityObservation[],
  now: Date,
): { state: OperatingStatesDocument["execution_capacity"]; hosts: OperatingStatesDocument["hosts"] } {
  const observed = now.toISOString();
  const views = hosts.map((h) => {
    const { serving, reason } = servingOf(h, now);
    const free = serving ? Math.max(0, h.vcpus - h.vcpusInUse) : 0;
    return {
      host: h.id,
      observed_at: observed,
      admitting: serving,
      last_seen_at: h.lastHeartbeatAt,
      vcpus_total: h.vcpus,
      vcpus_free: free,
      memory_bytes_total: h.memoryBytes,
      memory_bytes_free: serving ? Math.max(0, h.memoryBytes - h.vcpusInUse * BYTES_PER_VCPU) : 0,
      running_attempts: h.runningAttempts,
      free_slots_by_size: freeSlotsBySize(free),
      reason: reason ?? (free === 0 ? `every vCPU is held by its ${h.runningAttempts} running attempt(s)` : null),
    };
  });
  const serving = views.filter((v) => v.admitting);
  const slots: Record<string, number> = freeSlotsBySize(0);
  for (const v of serving)
    for (const [size, n] of Object.entries(v.free_slots_by_size)) slots[size] = (slots[size] ?? 0) + n;
  const vcpusFree = serving.reduce((sum, v) => sum + v.vcpus_free, 0);
  const refusing = new Date(now.getTime() + ESCALATION_SECONDS * 1000);
  const smallest = Math.min(...Object.values(VCPUS_OF_SIZE));
  const base =
    serving.length === 0
      ? operatingState("execution_capacity", {
          now,
          code: "no_serving_host",
          detail:
            hosts.length === 0
              ? "no host is enrolled"
              : `none of ${hosts.length} host(s) serves: ${views.map((v) => `${v.host} ${v.reason}`).join("; ")}`,
          refusingUntil: refusing,
        })
      : serving.every((v) => v.vcpus_free < smallest)
        ? operatingState("execution_capacity", {
            now,
            code: "no_free_capacity",
            detail: `${serving.length} serving host(s), every vCPU held by running attempts: new jobs wait`,
            refusingUntil: refusing,
          })
        : operatingState("execution_capacity", {
            now,
            code: "capacity_available",
            detail: `${serving.length} serving host(s) with ${vcpusFree} free vCPU(s)`,
            refusingUntil: null,
          });
  return {
    state: { ...base, serving_hosts: serving.length, vcpus_free: vcpusFree, free_slots_by_size: slots },
    hosts: views,
  };
}
