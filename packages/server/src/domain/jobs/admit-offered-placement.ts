import { SIZES } from "@kiln/contract";
import { type Db, enrolledHostOffers } from "@kiln/storage";
import { VCPUS_OF_SIZE } from "../policy/platform-limits.js";
import { refuse } from "../refusal.js";

/** Where the job's toolchain came from (the admission's toolchain_origin). */
export type ToolchainOrigin = "invocation" | "rust-toolchain-file" | "host-default";

/** How a submission's refusal names where the toolchain was asked for, and how to ask for another. */
const ASKED_BY: Readonly<Record<ToolchainOrigin, { field: string; change: string }>> = {
  invocation: {
    field: "body.workspace.invocation.toolchain",
    change: "name one of those (kiln cargo +<toolchain> or --toolchain)",
  },
  "rust-toolchain-file": {
    field: "the workspace's rust-toolchain file",
    change: "pin one of those in rust-toolchain.toml, or name one with kiln cargo +<toolchain>",
  },
  "host-default": { field: "the default toolchain", change: "name one of those with kiln cargo +<toolchain>" },
};

/** What a job asks of the host that runs it. */
export interface PlacementAsked {
  readonly size: string;
  /** null: not known (a job admitted before its toolchain was recorded), not judged. */
  readonly toolchain: string | null;
  readonly origin: ToolchainOrigin;
}

/**
 * Refuses a job no enrolled host can ever run — a size needing more vCPUs than any host has, or
 * a toolchain no host has installed — instead of queueing it to wait forever (the size) or
 * placing it to fail with toolchain_not_admitted (the toolchain). One decision for jobs.submit
 * (`invalid_request`, naming the request's field) and jobs.retry (`conflict`: the original was
 * admitted, the hosts changed since; the spec gives retry no invalid_request). Hosts advertise
 * their vCPUs and toolchains when they enroll; while no host enrolled (or, for toolchains, none
 * advertised any) nothing is known here and the job queues as before.
 */
export async function admitOfferedPlacement(db: Db, asked: PlacementAsked, retryOf?: string): Promise<void> {
  const offers = await enrolledHostOffers(db);
  if (offers.hosts === 0) return;
  const code = retryOf === undefined ? "invalid_request" : "conflict";
  const needed = VCPUS_OF_SIZE[asked.size] ?? Number.POSITIVE_INFINITY;
  if (needed > offers.largestVcpus) {
    const placeable = SIZES.filter((size) => (VCPUS_OF_SIZE[size] ?? Number.POSITIVE_INFINITY) <= offers.largestVcpus);
    const places =
      placeable.length === 0
        ? "so this deployment can place no size at all"
        : `so this deployment places only ${placeable.join(", ")}`;
    const instead = placeable.at(-1);
    const next = `${instead === undefined ? "" : `${retryOf === undefined ? "submit" : "submit it again"} with --size ${instead}, or `}ask the operator to enroll a host with at least ${needed} vCPUs`;
    refuse(
      code,
      `${retryOf === undefined ? "body.size asks for" : `job ${retryOf} ran on`} ${asked.size}, which needs ${needed} vCPUs; no kiln host here has that many (the largest has ${offers.largestVcpus}), ${places}: ${next}`,
    );
  }
  if (asked.toolchain === null || offers.toolchainHosts === 0 || offers.toolchains.has(asked.toolchain)) return;
  const installed = [...offers.toolchains].filter((name) => !name.includes("-unknown-")).slice(0, 20);
  const listed = `(installed: ${installed.length === 0 ? "none" : installed.join(", ")})`;
  if (retryOf !== undefined) {
    refuse(
      code,
      `job ${retryOf} asked for toolchain ${asked.toolchain}, which no kiln host has installed now ${listed}; submit it again naming one of those (kiln cargo +<toolchain>), or ask the operator to install it`,
    );
  }
  const by = ASKED_BY[asked.origin];
  refuse(
    code,
    `${by.field} asks for toolchain ${asked.toolchain}, which no kiln host has installed ${listed}; ${by.change}, or ask the operator to install it`,
  );
}
