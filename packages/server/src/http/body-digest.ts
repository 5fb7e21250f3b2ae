import { webcrypto } from "node:crypto";

/**
 * The SHA-256 of a raw body, hex, taken on the thread pool (WebCrypto's digest runs as an
 * asynchronous job): a 4 MiB source part costs the event loop a copy, not the 10 ms or more of
 * hashing it in place that every other request would wait behind (reliability trial T15's
 * disk-filling tenant sends ten parts a second).
 */
export async function bodyDigestOf(bytes: Uint8Array): Promise<string> {
  return Buffer.from(await webcrypto.subtle.digest("SHA-256", bytes)).toString("hex");
}
