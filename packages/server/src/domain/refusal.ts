import { REFUSAL_CODES, type RefusalCode } from "@kiln/contract";
import type { Db } from "@kiln/storage";

/** Optional members a refusal may name (spec, Errors). */
export interface RefusalExtras {
  current_version?: number;
  expired_at?: string;
  reset_at?: string;
  revoked_at?: string;
  retry_after_seconds?: number;
  role?: string;
  scope?: string;
}

export interface RefusalDocument extends RefusalExtras {
  code: RefusalCode;
  status: number;
  detail: string;
}

/**
 * A typed refusal thrown anywhere below a route; the error boundary renders it.
 * Local to the process: it never crosses the wire except as a RefusalDocument.
 */
export class Refusal extends Error {
  readonly code: RefusalCode;
  readonly extras: RefusalExtras;
  /**
   * A write the refusal itself must leave (an audited refusal, e.g. `operator_controlled`):
   * the handler's transaction rolls back, so a keyed mutation's refusal runs it in the
   * transaction that records the key's answer (perform-keyed.ts).
   */
  readonly recordRefusal: ((db: Db) => Promise<void>) | undefined;

  constructor(
    code: RefusalCode,
    detail: string,
    extras: RefusalExtras = {},
    recordRefusal?: (db: Db) => Promise<void>,
  ) {
    super(detail);
    this.name = "Refusal";
    this.code = code;
    this.extras = extras;
    this.recordRefusal = recordRefusal;
  }

  get status(): number {
    return REFUSAL_CODES[this.code].status;
  }

  toDocument(): RefusalDocument {
    return { code: this.code, status: this.status, detail: this.message, ...this.extras };
  }
}

export function refuse(code: RefusalCode, detail: string, extras: RefusalExtras = {}): never {
  throw new Refusal(code, detail, extras);
}
