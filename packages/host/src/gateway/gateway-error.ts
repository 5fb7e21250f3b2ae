/**
 * Why the dependency gateway could not provide a job's packages, typed so the job's failure
 * names the cause (and never a credential: details carry registry URLs and statuses only).
 */
export type GatewayErrorKind =
  | "invalid_lockfile"
  | "unknown_crate"
  | "checksum_mismatch"
  | "upstream_unreachable"
  | "upstream_refused"
  | "unsupported_source"
  | "resolution_failed";

export class GatewayError extends Error {
  constructor(
    readonly kind: GatewayErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "GatewayError";
  }
}
