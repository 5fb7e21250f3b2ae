import type { KilnClient } from "@kiln/client";

/** One API request's parts, untyped: the MCP layer routes arguments it received as JSON. */
export interface RawInput {
  readonly params?: Record<string, unknown>;
  readonly query?: Record<string, unknown>;
  readonly body?: unknown;
  readonly idempotencyKey?: string;
}

/**
 * Calls an operation by id with an input assembled at run time. The typed client checks
 * inputs at compile time; here the API's own validation is the check, and its refusal
 * names the member.
 */
export function callOperation(client: KilnClient, id: string, input: RawInput): Promise<unknown> {
  const call = client.call as unknown as (id: string, input: RawInput) => Promise<unknown>;
  return call(id, input);
}
