import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * Content-addressed bytes on the local filesystem (the embedded default; S3-compatible
 * storage is the scale-out equivalent). A blob is named by its SHA-256, written to a
 * temporary file and renamed into place, so a reader never sees a partial blob and
 * two writers of the same bytes converge on one file.
 */
export class LocalBlobStore {
  constructor(readonly root: string) {}

  pathOf(sha256: string): string {
    if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`not a sha256 digest: ${sha256}`);
    return join(this.root, sha256.slice(0, 2), sha256);
  }

  /**
   * Stores `bytes`. `verifiedSha256` is for a caller that has just hashed them itself (a source
   * part checked against its declared digest): it spares hashing the same bytes twice.
   */
  async put(bytes: Uint8Array, verifiedSha256?: string): Promise<{ sha256: string; bytes: number }> {
    const sha256 = verifiedSha256 ?? createHash("sha256").update(bytes).digest("hex");
    const path = this.pathOf(sha256);
    if (!(await this.has(sha256))) {
      await mkdir(join(this.root, sha256.slice(0, 2)), { recursive: true });
      const temporary = `${path}.${randomBytes(6).toString("hex")}.tmp`;
      await writeFile(temporary, bytes);
      await rename(temporary, path);
    }
    return { sha256, bytes: bytes.byteLength };
  }

  async get(sha256: string): Promise<Buffer> {
    return readFile(this.pathOf(sha256));
  }

  async has(sha256: string): Promise<boolean> {
    try {
      await stat(this.pathOf(sha256));
      return true;
    } catch {
      return false;
    }
  }
}
