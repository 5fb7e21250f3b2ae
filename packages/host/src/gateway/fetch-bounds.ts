import { GatewayError } from "./gateway-error.js";

/**
 * How much the dependency gateway fetches for one job, and how patiently. A workspace names
 * its upstreams, so without bounds one job could make the host download without end, hold a
 * response in memory, or wait on an upstream that never answers. Each bound is far above what
 * real dependencies reach and is named in the job's failure when crossed.
 */
export interface FetchBounds {
  /** One `.crate` download (crates.io refuses uploads over 10 MiB unless raised for a crate). */
  readonly crateBytes: number;
  /** One index file (every version of a crate): crates.io's largest are a few MB. */
  readonly indexFileBytes: number;
  /** One line of an index file (one version). */
  readonly indexLineBytes: number;
  /** A registry's config.json. */
  readonly configBytes: number;
  /** Everything one job's fetch phase downloads: index files, crates and git objects. */
  readonly jobBytes: number;
  /** An upstream that sends nothing (no connection, no headers, no body byte) for this long is given up. */
  readonly idleTimeoutMs: number;
  /** Redirects followed for one request (each hop checked by the egress policy). */
  readonly redirects: number;
}

export const DEFAULT_FETCH_BOUNDS: FetchBounds = {
  crateBytes: 64 * 2 ** 20,
  indexFileBytes: 16 * 2 ** 20,
  indexLineBytes: 2 ** 20,
  configBytes: 64 * 2 ** 10,
  jobBytes: 4 * 2 ** 30,
  idleTimeoutMs: 30_000,
  redirects: 5,
};

/** "64 MiB", "512 KiB". */
export function bytesText(bytes: number): string {
  if (bytes >= 2 ** 30 && bytes % 2 ** 30 === 0) return `${bytes / 2 ** 30} GiB`;
  if (bytes >= 2 ** 20) return `${Math.round((bytes / 2 ** 20) * 10) / 10} MiB`;
  if (bytes >= 2 ** 10) return `${Math.round((bytes / 2 ** 10) * 10) / 10} KiB`;
  return `${bytes} bytes`;
}

/** The bytes one job may still fetch; every byte received from any upstream is taken from it. */
export class FetchBudget {
  #used = 0;

  constructor(readonly limit: number) {}

  get used(): number {
    return this.#used;
  }

  /** Counts `bytes` received for `what`; throws once the job's budget is spent. */
  take(bytes: number, what: string): void {
    this.#used += bytes;
    if (this.#used > this.limit) {
      throw new GatewayError(
        "too_large",
        `${what}: the job's dependencies exceed the ${bytesText(this.limit)} the dependency gateway fetches for one job`,
      );
    }
  }

  /** Whether taking `bytes` more would pass the budget (checked before a download whose length is known). */
  wouldExceed(bytes: number): boolean {
    return this.#used + bytes > this.limit;
  }
}
