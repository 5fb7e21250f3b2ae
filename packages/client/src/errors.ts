import type { RefusalCode } from "@kiln/contract";

/** A refusal the service sent: a wire error carrying the typed Refusal document. */
export class KilnRefusal extends Error {
  constructor(
    readonly operation: string,
    readonly refusal: { code: RefusalCode; status: number; detail: string; [member: string]: unknown },
  ) {
    super(`${operation} refused ${refusal.code}: ${refusal.detail}`);
    this.name = "KilnRefusal";
  }

  get code(): RefusalCode {
    return this.refusal.code;
  }
}

/** A local failure: the request never got a well-formed answer (network, bad response). */
export class KilnTransportError extends Error {
  constructor(
    readonly operation: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${operation}: ${message}`, options);
    this.name = "KilnTransportError";
  }
}
