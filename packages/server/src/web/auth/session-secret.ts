import { createHash, randomBytes } from "node:crypto";

/** Session cookie values, sign-in link tokens and device codes: 256 random bits, base64url. */
export function mintSecret(): string {
  return randomBytes(32).toString("base64url");
}

export function hashSecret(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
