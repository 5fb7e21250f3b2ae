import { randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { findCurrentOperatorCredential, replaceOperatorCredential, type Storage } from "@kiln/storage";
import { SecretBox } from "../../domain/secrets/secret-box.js";
import { hashSecret } from "./session-secret.js";

/**
 * The operator bootstrap credential (`kiln_operator_…`). The server verifies it by
 * digest only. The admin CLI must print it again on request (DESIGN.md §7), so it is
 * also kept encrypted (AES-256-GCM) under a master key that never enters the
 * database: KILN_MASTER_KEY (64 hex digits) or `<data dir>/master.key` (mode 0600).
 */
const PREFIX = "kiln_operator_";

export async function verifyOperatorCredential(storage: Storage, presented: string): Promise<boolean> {
  if (!presented.startsWith(PREFIX)) return false;
  const current = await findCurrentOperatorCredential(storage);
  if (current === undefined) return false;
  const a = Buffer.from(current.credential_hash, "hex");
  const b = Buffer.from(hashSecret(presented), "hex");
  return a.length === b.length && timingSafeEqual(a, b);
}

export function masterKey(dataDir: string, env: NodeJS.ProcessEnv = process.env): Buffer {
  const fromEnv = env.KILN_MASTER_KEY?.trim();
  if (fromEnv !== undefined && fromEnv !== "") {
    if (!/^[0-9a-f]{64}$/i.test(fromEnv)) throw new Error("KILN_MASTER_KEY must be 64 hexadecimal digits");
    return Buffer.from(fromEnv, "hex");
  }
  const file = join(dataDir, "master.key");
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(file, randomBytes(32).toString("hex"), { mode: 0o600, flag: "wx" });
  }
  return Buffer.from(readFileSync(file, "utf8").trim(), "hex");
}

/** The credential in force (minting the first one), or a new one with `rotate`. */
export async function operatorCredential(storage: Storage, key: Buffer, rotate: boolean, now: Date): Promise<string> {
  const box = new SecretBox(key);
  const current = await findCurrentOperatorCredential(storage);
  if (current !== undefined && !rotate) {
    try {
      return box.open(current.credential_ciphertext);
    } catch {
      throw new Error(
        "the operator credential cannot be decrypted with this master key; use --rotate to mint a new one",
      );
    }
  }
  const value = PREFIX + randomBytes(32).toString("base64url");
  await replaceOperatorCredential(
    storage,
    {
      credentialHash: hashSecret(value),
      credentialCiphertext: box.seal(value),
    },
    now,
  );
  return value;
}
