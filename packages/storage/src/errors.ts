/**
 * Typed failures a caller is expected to turn into a refusal. Each names the request field at
 * fault so the HTTP layer can say which one (`invalid_request`'s detail names the field).
 */

/** A pagination cursor that this service did not issue, or that was altered. */
export class InvalidCursorError extends Error {
  override readonly name = "InvalidCursorError";
  readonly field = "cursor";

  constructor(reason: string) {
    super(`cursor is not valid: ${reason}`);
  }
}

/** The tenant a write names does not exist. */
export class UnknownTenantError extends Error {
  override readonly name = "UnknownTenantError";
  readonly field = "tenant";

  constructor(readonly tenantId: string) {
    super(`tenant ${tenantId} does not exist`);
  }
}
