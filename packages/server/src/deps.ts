import type { Clock, Storage } from "@kiln/storage";

/** Everything buildApp needs from the outside world; main.ts wires the real ones. */
export interface AppDeps {
  readonly storage: Storage;
  readonly clock: Clock;
  /** Version string served in the OpenAPI document. */
  readonly version: string;
  /**
   * Test-only: validate every response against its declared schema and answer 500
   * with the violation when it drifts, so no handler can drift from the contract.
   */
  readonly checkResponses?: boolean;
  /** pino logger options, or false for none. */
  readonly logger?: boolean | Record<string, unknown>;
}
