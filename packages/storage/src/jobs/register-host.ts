import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Enrolls a host, or refreshes its capacity and heartbeat when it re-enrolls. */
export async function registerHost(
  target: StorageOrTransaction,
  input: {
    id: string;
    vcpus: number;
    memoryBytes: number;
    isolation: string;
    isolationReason?: string;
    /** The toolchain names the host admits; absent: it advertised none (admission does not judge). */
    toolchains?: readonly string[];
    now: Date;
  },
): Promise<void> {
  const now = formatTimestamp(input.now);
  const toolchains = input.toolchains === undefined ? null : JSON.stringify([...input.toolchains].sort());
  await executorOf(target)
    .insertInto("hosts")
    .values({
      id: input.id,
      vcpus: input.vcpus,
      memory_bytes: input.memoryBytes,
      isolation: input.isolation,
      isolation_reason: input.isolationReason ?? null,
      toolchains: toolchains,
      state: "serving",
      enrolled_at: now,
      last_heartbeat_at: now,
    })
    .onConflict((c) =>
      c.column("id").doUpdateSet({
        vcpus: input.vcpus,
        memory_bytes: input.memoryBytes,
        isolation: input.isolation,
        isolation_reason: input.isolationReason ?? null,
        toolchains: toolchains,
        last_heartbeat_at: now,
      }),
    )
    .execute();
}
