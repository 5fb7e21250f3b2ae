import { createHash, randomBytes } from "node:crypto";

/**
 * Token values: `kiln_cli_`, `kiln_agent_` or `kiln_enroll_` (a one-time host enrollment token,
 * the bootstrap credential a remote host redeems for its client certificate), 32 base62 characters of randomness
 * (≈190 bits), then a 6-character base62 CRC-32 of everything before it. The
 * checksum lets a malformed or mistyped value be refused before any database
 * lookup, and lets secret scanners recognise kiln tokens without false positives.
 */
export type TokenKind = "cli" | "agent" | "enroll";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const RANDOM_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const PREFIXES: Record<TokenKind, string> = {
  cli: "kiln_cli_",
  agent: "kiln_agent_",
  enroll: "kiln_enroll_",
};
const SHAPE = /^kiln_(cli|agent|enroll)_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$/;

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(text: string): number {
  let crc = 0xffffffff;
  for (const byte of Buffer.from(text, "utf8")) crc = (CRC_TABLE[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function base62(value: number, width: number): string {
  let out = "";
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}

export function mintToken(kind: TokenKind): string {
  // Rejection sampling keeps every base62 character uniformly likely.
  let random = "";
  while (random.length < RANDOM_LENGTH) {
    for (const byte of randomBytes(48)) {
      if (byte < 248 && random.length < RANDOM_LENGTH) random += ALPHABET[byte % 62];
    }
  }
  const body = PREFIXES[kind] + random;
  return body + base62(crc32(body), CHECKSUM_LENGTH);
}

/** The token's kind when its shape and checksum hold, else null. */
export function tokenKindOf(value: string): TokenKind | null {
  const match = SHAPE.exec(value);
  if (match === null) return null;
  const body = value.slice(0, value.length - CHECKSUM_LENGTH);
  return base62(crc32(body), CHECKSUM_LENGTH) === match[3] ? (match[1] as TokenKind) : null;
}

/** Only this digest is stored; the value itself never is. */
export function hashToken(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
