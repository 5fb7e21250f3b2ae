/**
 * Why the dependency gateway could not provide a job's packages, typed so the job's failure
 * names the cause (and never a credential: details carry registry URLs and statuses only,
 * never bytes an upstream sent).
 */
export type GatewayErrorKind =
  | "invalid_lockfile"
  | "unknown_crate"
  | "checksum_mismatch"
  | "upstream_unreachable"
  | "upstream_refused"
  | "unsupported_source"
  | "resolution_failed"
  /** The egress policy refused a URL before anything was asked of it (egress-policy.ts). */
  | "egress_refused"
  /** A response, a crate or the job's fetching went past a size bound (fetch-bounds.ts). */
  | "too_large"
  /** An upstream did not answer in time. */
  | "timed_out";

export class GatewayError extends Error {
  constructor(
    readonly kind: GatewayErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "GatewayError";
  }
}
