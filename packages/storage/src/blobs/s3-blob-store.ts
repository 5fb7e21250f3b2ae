import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Transform } from "node:stream";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadBucketCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { assertSha256, BlobNotFoundError, type BlobReadStream, type BlobStore, type StoredBlob } from "./blob-store.js";
import type { S3BlobLocation } from "./s3-blob-url.js";

/** Above this many bytes a blob goes up in parts (lib-storage's Upload); below, one PutObject. */
export const DEFAULT_MULTIPART_THRESHOLD_BYTES = 16 * 1024 * 1024;
/** The part size of a multipart upload; S3 refuses parts under 5 MiB (all but the last). */
export const DEFAULT_PART_BYTES = 8 * 1024 * 1024;
/** Parts in flight at once per upload: enough to fill a link, few enough to bound memory. */
const PARTS_IN_FLIGHT = 4;

export interface S3BlobStoreOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Key prefix without leading or trailing slash; "" for the bucket's root. */
  readonly prefix: string;
  readonly multipartThresholdBytes?: number;
  readonly partBytes?: number;
  /** Where bytes received as a stream are staged before they go up (default: `kiln-blob-staging` in the OS's temp dir). */
  readonly stagingDirectory?: string;
}

/**
 * Blobs in S3-compatible object storage (KILN_BLOB_URL), the scale-out counterpart of
 * `LocalBlobStore`: several kiln-servers share one bucket. An object's key is
 * `<prefix>/<sha[0:2]>/<sha>`, its bytes never change, so correctness rests on nothing an
 * S3-compatible server may lack: no conditional write (two writers of one key write the same
 * bytes), no listing, no ListParts. A put first asks (HEAD) whether the object is already there
 * and skips the upload when it is; a read checks the bytes against their name, so a damaged or
 * half-written object is an error, never wrong bytes handed on.
 */
export class S3BlobStore implements BlobStore {
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #multipartThresholdBytes: number;
  readonly #partBytes: number;
  readonly stagingDirectory: string;

  constructor(options: S3BlobStoreOptions) {
    this.#client = options.client;
    this.#bucket = options.bucket;
    this.#prefix = options.prefix.replace(/^\/+|\/+$/g, "");
    this.#partBytes = options.partBytes ?? DEFAULT_PART_BYTES;
    this.#multipartThresholdBytes = options.multipartThresholdBytes ?? DEFAULT_MULTIPART_THRESHOLD_BYTES;
    this.stagingDirectory = options.stagingDirectory ?? join(tmpdir(), "kiln-blob-staging");
  }

  /** A store for a parsed KILN_BLOB_URL (see `s3ClientFor`). */
  static at(
    location: S3BlobLocation,
    options: { readonly clientConfig?: S3ClientConfig } & Pick<
      S3BlobStoreOptions,
      "multipartThresholdBytes" | "partBytes" | "stagingDirectory"
    > = {},
  ): S3BlobStore {
    const { clientConfig, ...tuning } = options;
    const client = s3ClientFor(location, clientConfig);
    return new S3BlobStore({ client, bucket: location.bucket, prefix: location.prefix, ...tuning });
  }

  get location(): string {
    return `s3://${this.#bucket}/${this.#prefix}`;
  }

  /** The object key of a digest: `<prefix>/<sha[0:2]>/<sha>`, sharded like the local store's files. */
  keyOf(sha256: string): string {
    assertSha256(sha256);
    const key = `${sha256.slice(0, 2)}/${sha256}`;
    return this.#prefix === "" ? key : `${this.#prefix}/${key}`;
  }

  async put(bytes: Uint8Array, verifiedSha256?: string): Promise<StoredBlob> {
    const sha256 = verifiedSha256 ?? createHash("sha256").update(bytes).digest("hex");
    await this.#write(this.keyOf(sha256), bytes.byteLength, () =>
      Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    );
    return { sha256, bytes: bytes.byteLength };
  }

  /** As `put`, the bytes read from the file as they go up (never whole in memory). */
  async putFile(path: string, sha256: string): Promise<StoredBlob> {
    const { size } = await stat(path);
    await this.#write(this.keyOf(sha256), size, () => createReadStream(path));
    return { sha256, bytes: size };
  }

  /**
   * Writes `size` bytes under `Key` unless an object of that length is there already (one of
   * another length was damaged or cut short: it is written again); large ones in parts.
   */
  async #write(Key: string, size: number, body: () => Buffer | ReturnType<typeof createReadStream>): Promise<void> {
    if ((await this.#lengthOf(Key)) === size) return;
    if (size > this.#multipartThresholdBytes) {
      // Unfinished parts are aborted on failure (leavePartsOnError false); a server that
      // cannot abort them (s3rver) keeps them until a lifecycle rule expires them.
      await new Upload({
        client: this.#client,
        params: { Bucket: this.#bucket, Key, Body: body(), ContentType: "application/octet-stream" },
        partSize: this.#partBytes,
        queueSize: PARTS_IN_FLIGHT,
        leavePartsOnError: false,
      }).done();
      return;
    }
    await this.#client.send(
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key,
        Body: body(),
        ContentLength: size,
        ContentType: "application/octet-stream",
      }),
    );
  }

  async get(sha256: string): Promise<Buffer> {
    const Key = this.keyOf(sha256);
    let body: Uint8Array;
    try {
      const response = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key }));
      if (response.Body === undefined) throw new Error(`${this.location}: ${Key} came back without a body`);
      body = await response.Body.transformToByteArray();
    } catch (error) {
      if (isMissing(error)) throw new BlobNotFoundError(sha256);
      throw error;
    }
    const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const got = createHash("sha256").update(bytes).digest("hex");
    if (got !== sha256) throw new Error(`${this.location}: ${Key} holds bytes hashing to ${got}`);
    return bytes;
  }

  async has(sha256: string): Promise<boolean> {
    return (await this.#lengthOf(this.keyOf(sha256))) !== undefined;
  }

  /**
   * The object streamed as it arrives. Its digest is checked as the bytes pass: a mismatch
   * destroys the stream with an error at the end, so the reply is cut short instead of
   * completing with wrong bytes (the length was already sent).
   */
  async openRead(sha256: string): Promise<BlobReadStream | undefined> {
    const Key = this.keyOf(sha256);
    let response: GetObjectCommandOutput;
    try {
      response = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key }));
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
    const body = response.Body;
    if (!(body instanceof Readable) || response.ContentLength === undefined) {
      throw new Error(`${this.location}: ${Key} came back without a streamable body and length`);
    }
    const hash = createHash("sha256");
    const location = this.location;
    const checked = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        done(null, chunk);
      },
      flush(done) {
        const got = hash.digest("hex");
        done(got === sha256 ? null : new Error(`${location}: ${Key} holds bytes hashing to ${got}`));
      },
    });
    body.on("error", (error) => checked.destroy(error));
    checked.on("close", () => body.destroy());
    return { bytes: response.ContentLength, stream: body.pipe(checked) };
  }

  /**
   * DeleteObject. S3 answers a key it does not hold with success too; a NoSuchKey from a
   * stricter S3-compatible server is taken the same way, so deleting a missing blob is no error.
   */
  async delete(sha256: string): Promise<void> {
    try {
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: this.keyOf(sha256) }));
    } catch (error) {
      if (!isMissing(error)) throw error;
    }
  }

  /** HeadBucket: the bucket exists and these credentials reach it, without writing anything. */
  async probeWritable(): Promise<void> {
    await this.#client.send(new HeadBucketCommand({ Bucket: this.#bucket }));
  }

  /** The object's length from a HEAD, or undefined when there is none. */
  async #lengthOf(Key: string): Promise<number | undefined> {
    try {
      const head = await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key }));
      return head.ContentLength ?? 0;
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }
}

/**
 * The SDK client for a parsed KILN_BLOB_URL; credentials from the SDK's default chain unless
 * `clientConfig` names them (tests against a local server do).
 */
export function s3ClientFor(location: S3BlobLocation, clientConfig: S3ClientConfig = {}): S3Client {
  return new S3Client({
    ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint }),
    ...(location.region === undefined ? {} : { region: location.region }),
    forcePathStyle: location.forcePathStyle,
    // Integrity is the content digest, checked on every read (`get`, `openRead`); the SDK's
    // optional CRC32 checksums are not asked for, since S3-compatible servers (s3rver among
    // them) neither store nor return them and a multipart completion would then fail.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    ...clientConfig,
  });
}

/**
 * No such object: NoSuchKey for a GET, a bare NotFound for a HEAD (a 404 without a body to name
 * it). A missing bucket (NoSuchBucket on a GET) is a failing store, not a missing blob.
 */
function isMissing(error: unknown): boolean {
  const name = (error as { name?: string } | null)?.name;
  return name === "NoSuchKey" || name === "NotFound";
}
