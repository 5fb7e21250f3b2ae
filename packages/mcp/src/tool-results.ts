import { KilnRefusal, KilnTransportError } from "@kiln/client";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { InvalidToolArguments } from "./tools.js";

/** What went wrong locally: the request never got the API's answer. */
export interface LocalError {
  readonly kind: "invalid_arguments" | "transport";
  readonly operation: string;
  readonly detail: string;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The operation's response document as the tool's result. */
export function documentResult(document: unknown): CallToolResult {
  const text = document === undefined ? "null" : JSON.stringify(document);
  return {
    content: [{ type: "text", text }],
    ...(isObject(document) ? { structuredContent: document } : {}),
  };
}

/**
 * A refused operation is a tool error (not a protocol error) carrying the API's typed
 * Refusal document: `{code, status, detail, …}`.
 */
export function refusalResult(refusal: KilnRefusal["refusal"]): CallToolResult {
  return {
    isError: true,
    content: [{ type: "text", text: JSON.stringify(refusal) }],
    structuredContent: refusal,
  };
}

/** A local failure is a tool error of a different shape: `{local_error: {kind, operation, detail}}`. */
export function localErrorResult(error: LocalError): CallToolResult {
  return {
    isError: true,
    content: [{ type: "text", text: `kiln mcp could not perform ${error.operation}: ${error.detail}` }],
    structuredContent: { local_error: error },
  };
}

function causeOf(error: Error): string {
  const cause = error.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    const inner = cause.cause instanceof Error ? ` (${cause.cause.message})` : "";
    return `${cause.message}${typeof code === "string" ? ` ${code}` : ""}${inner}`;
  }
  return "";
}

/** Turns what an API call threw into the tool's result; anything unexpected is rethrown. */
export function failureResult(operation: string, error: unknown): CallToolResult {
  if (error instanceof KilnRefusal) return refusalResult(error.refusal);
  if (error instanceof InvalidToolArguments) {
    return localErrorResult({ kind: "invalid_arguments", operation, detail: error.message });
  }
  if (error instanceof KilnTransportError) {
    const cause = causeOf(error);
    return localErrorResult({
      kind: "transport",
      operation,
      detail: cause === "" ? error.message : `${error.message}: ${cause}`,
    });
  }
  throw error;
}
