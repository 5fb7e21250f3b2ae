import { createHash } from "node:crypto";

/**
 * Canonical JSON: object keys sorted, so the same request always hashes the same. A typed array
 * (an inline source file's bytes once decoded off the event loop) is canonical as the array of
 * its numbers, so a request hashes the same whichever form its bytes are held in.
 */
function canonical(value: unknown): string {
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    return JSON.stringify(Array.from(value as Uint8Array));
  }
  if (Array.isArray(value)) {
    // An array of plain values (an inline source file's bytes: hundreds of thousands of
    // integers) has one canonical form, JSON.stringify's, which is many times faster than
    // joining each element's string.
    if (value.every((v) => v === null || typeof v !== "object")) return JSON.stringify(value);
    return `[${value.map(canonical).join(",")}]`;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * The idempotency hash of a request: its operation and its canonical JSON. Pure and free of
 * storage, so the body worker (body-worker.ts) takes it off the event loop for large bodies.
 */
export function requestHashOf(operation: string, request: unknown): string {
  return createHash("sha256").update(operation).update("\n").update(canonical(request)).digest("hex");
}
