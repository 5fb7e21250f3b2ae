import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Whether claimNextJob may place anything on the host: not while it is draining (the operator's
 * drain) nor while an impairment closed its admission. A host kiln has no row for (a test's bare
 * claim) admits. One row read, no lock: a waiting claim asks it to tell a host that takes no work
 * from one that found none, and claimNextJob decides placement itself under the host row's lock.
 */
export async function readHostAdmission(
  target: StorageOrTransaction,
  input: { hostId: string },
): Promise<{ admitting: true } | { admitting: false; why: "draining" | "admission_closed" }> {
  const host = await executorOf(target)
    .selectFrom("hosts")
    .select(["state", "admission_closed_at"])
    .where("id", "=", input.hostId)
    .executeTakeFirst();
  if (host?.state === "draining") return { admitting: false, why: "draining" };
  if (host?.admission_closed_at != null) return { admitting: false, why: "admission_closed" };
  return { admitting: true };
}
