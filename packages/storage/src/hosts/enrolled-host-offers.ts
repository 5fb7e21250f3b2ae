import { executorOf, type StorageOrTransaction } from "../executor.js";

/** What the enrolled hosts offer a job, as each advertised it at its latest enrollment. */
export interface EnrolledHostOffers {
  /**
   * Enrolled hosts, serving or draining (a drain ends; the queue holds a job meanwhile); 0 when
   * none enrolled yet, and then nothing is known.
   */
  readonly hosts: number;
  /** The most vCPUs one of them has: no size needing more can ever be placed. */
  readonly largestVcpus: number;
  /** How many advertised their toolchains (0: none did, and then toolchains are not known). */
  readonly toolchainHosts: number;
  /** Every toolchain name those hosts advertised. */
  readonly toolchains: ReadonlySet<string>;
}

/** The enrolled hosts' offers (vCPUs, toolchains), in one read of `hosts`. */
export async function enrolledHostOffers(target: StorageOrTransaction): Promise<EnrolledHostOffers> {
  const rows = await executorOf(target).selectFrom("hosts").select(["vcpus", "toolchains"]).execute();
  const toolchains = new Set<string>();
  let toolchainHosts = 0;
  let largestVcpus = 0;
  for (const row of rows) {
    largestVcpus = Math.max(largestVcpus, Number(row.vcpus));
    if (row.toolchains === null) continue;
    toolchainHosts += 1;
    for (const name of JSON.parse(row.toolchains) as string[]) toolchains.add(name);
  }
  return { hosts: rows.length, largestVcpus, toolchainHosts, toolchains };
}
