import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseS3BlobUrl } from "../src/index.js";

describe("KILN_BLOB_URL", () => {
  it("names the bucket, the prefix and an S3-compatible endpoint", () => {
    assert.deepEqual(
      parseS3BlobUrl(
        "s3://kiln-blobs/prod/blobs/?endpoint=http://127.0.0.1:4568&region=us-east-1&force_path_style=true",
      ),
      {
        bucket: "kiln-blobs",
        prefix: "prod/blobs",
        endpoint: "http://127.0.0.1:4568",
        region: "us-east-1",
        forcePathStyle: true,
      },
    );
  });

  it("leaves endpoint and region to the SDK for AWS itself", () => {
    assert.deepEqual(parseS3BlobUrl("s3://kiln-blobs"), {
      bucket: "kiln-blobs",
      prefix: "",
      endpoint: undefined,
      region: undefined,
      forcePathStyle: false,
    });
  });

  for (const [text, message] of [
    ["file:///var/kiln", /s3:\/\//],
    ["not a url", /s3:\/\/bucket\/prefix/],
    ["s3://AKIA:secret@kiln-blobs/x", /must not carry credentials/],
    ["s3://Bad_Bucket/x", /no valid bucket/],
    ["s3://kiln-blobs/x?endpoint=ftp://host", /endpoint must be an http/],
    ["s3://kiln-blobs/x?force_path_style=yes", /force_path_style must be true or false/],
    ["s3://kiln-blobs/x?acl=public-read", /unknown parameter acl/],
  ] as const) {
    it(`refuses ${text}`, () => {
      assert.throws(() => parseS3BlobUrl(text), message);
    });
  }
});
