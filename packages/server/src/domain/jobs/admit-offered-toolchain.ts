import { advertisedToolchains, type Db } from "@kiln/storage";
import { refuse } from "../refusal.js";

/** Where the job's toolchain came from (the admission's toolchain_origin). */
type ToolchainOrigin = "invocation" | "rust-toolchain-file" | "host-default";

/** How the refusal names where the toolchain was asked for, and how to ask for another. */
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

/**
 * Refuses, at submission, a toolchain no enrolled host has installed — instead of placing the
 * job and failing it with toolchain_not_admitted on the host (DESIGN: an unknown toolchain is
 * refused with a clear error, never replaced). Hosts advertise the names they admit when they
 * enroll; while no host advertised any, nothing is known here and the host still decides.
 */
export async function admitOfferedToolchain(db: Db, toolchain: string, origin: ToolchainOrigin): Promise<void> {
  const offered = await advertisedToolchains(db);
  if (offered.hosts === 0 || offered.names.has(toolchain)) return;
  const asked = ASKED_BY[origin];
  const installed = [...offered.names].filter((name) => !name.includes("-unknown-")).slice(0, 20);
  refuse(
    "invalid_request",
    `${asked.field} asks for toolchain ${toolchain}, which no kiln host has installed (installed: ${
      installed.length === 0 ? "none" : installed.join(", ")
    }); ${asked.change}, or ask the operator to install it`,
  );
}
