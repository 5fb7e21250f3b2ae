import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/**
 * Seals secrets kiln must be able to read again (the operator credential, tenants' private
 * registry credentials) with AES-256-GCM under the master key, which never enters the
 * database: a sealed value is `iv.tag.ciphertext` in base64url, and opening one that was
 * altered or sealed under another key fails.
 */
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error("the master key must be 32 bytes");
    this.#key = key;
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return [iv, cipher.getAuthTag(), body].map((b) => b.toString("base64url")).join(".");
  }

  /** The plain value; throws when the sealed text is damaged or was sealed under another key. */
  open(sealed: string): string {
    const [iv, tag, body] = sealed.split(".").map((part) => Buffer.from(part, "base64url"));
    if (iv === undefined || tag === undefined || body === undefined) throw new Error("a sealed secret is damaged");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
  }
}
