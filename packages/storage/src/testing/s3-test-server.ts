import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { S3Client } from "@aws-sdk/client-s3";
import { S3BlobStore, type S3BlobStoreOptions, s3ClientFor } from "../blobs/s3-blob-store.js";

/** The part of s3rver's API the tests use (the package ships no types). */
interface S3rverServer {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverConstructor = new (options: {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string }[];
}) => S3rverServer;

/** A real S3-compatible server (s3rver) on a loopback port, its objects in a temporary directory. */
export interface S3TestServer {
  readonly endpoint: string;
  readonly bucket: string;
  /**
   * The name of every command the stores' SDK clients sent, in order ("PutObjectCommand",
   * "UploadPartCommand", ...): what went over the wire, for tests that say which path was taken.
   */
  readonly commandsSent: string[];
  /** A bare SDK client on this server, for a test to look at or damage objects behind a store's back. */
  client(): S3Client;
  /** A store on this server's bucket under `prefix`, through the real AWS SDK client. */
  store(prefix: string, options?: Pick<S3BlobStoreOptions, "multipartThresholdBytes" | "partBytes">): S3BlobStore;
  stop(): Promise<void>;
}

/**
 * Starts s3rver for a test. s3rver signs with the fixed key pair S3RVER/S3RVER; it lacks
 * conditional writes and ListParts, which the S3 blob store never relies on.
 */
export async function startS3TestServer(bucket = "kiln-blobs"): Promise<S3TestServer> {
  // Loaded here, not at the top, so `@kiln/storage/testing` needs s3rver only where S3 is tested.
  const S3rver = createRequire(import.meta.url)("s3rver") as S3rverConstructor;
  const directory = mkdtempSync(join(tmpdir(), "kiln-s3rver-"));
  // Its stores' staging directory (streamed bytes before they go up), removed with the server.
  const staging = mkdtempSync(join(tmpdir(), "kiln-s3-staging-"));
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const commandsSent: string[] = [];
  const client = () =>
    s3ClientFor(
      { bucket, prefix: "", endpoint, region: "us-east-1", forcePathStyle: true },
      { credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } },
    );
  return {
    endpoint,
    bucket,
    commandsSent,
    client,
    store: (prefix, options = {}) => {
      const logged = client();
      logged.middlewareStack.add(
        (next, context) => (args) => {
          commandsSent.push(String(context.commandName));
          return next(args);
        },
        { step: "initialize", name: "kilnTestCommandLog" },
      );
      // Staging in the server's own temp dir, removed with it.
      return new S3BlobStore({
        client: logged,
        bucket,
        prefix,
        stagingDirectory: join(directory, "staging"),
        ...options,
      });
    },
    stop: async () => {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
      rmSync(staging, { recursive: true, force: true });
    },
  };
}
