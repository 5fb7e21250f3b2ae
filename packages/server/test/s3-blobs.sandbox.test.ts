/**
 * The service with its blobs in S3-compatible object storage (KILN_BLOB_URL): a real s3rver on
 * a loopback port behind the real AWS SDK client, no mock. A streamed source archive goes up in
 * parts through the API into the bucket, is verified and admitted from there, a host reads its
 * parts back through the host service, and the attempt's Cargo output and artifacts, stored in
 * the bucket, download through the API byte for byte.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DeleteObjectCommand, HeadObjectCommand } from "@aws-sdk/client-s3";
import { silentLogger } from "@kiln/contract";
import { S3BlobStore } from "@kiln/storage";
import { DIALECTS, type S3TestServer, startS3TestServer } from "@kiln/storage/testing";
import { configFromEnv } from "../src/config.js";
import { HostService } from "../src/domain/hosts/host-service.js";
import { type Embedded, explainJob, startEmbedded } from "../src/testing/e2e-jobs.js";
import { appWithTenant, bearer, type TestApp, testApp } from "../src/testing/harness.js";
import { claimJob, finishJob } from "../src/testing/job-fixtures.js";
import { operatorClient } from "./operator-session-fixture.js";
import { archiveOf, archiveSubmission, Sources, sha256 } from "./source-archives.js";

let s3: S3TestServer;
before(async () => {
  s3 = await startS3TestServer("kiln-server-blobs");
});
after(() => s3.stop());

for (const dialect of DIALECTS) {
  describe(`blobs in S3-compatible storage through the service (${dialect.name})`, { skip: dialect.skip }, () => {
    const prefix = `server-${dialect.name}`;
    let blobs: S3BlobStore;
    let t: TestApp;
    let member: { tenant: string; token: string };
    before(async () => {
      blobs = s3.store(prefix);
      ({ t, person: member } = await appWithTenant(dialect, { role: "member", deps: { blobs } }));
    });
    after(() => t.close());

    /** Whether the bucket holds `<prefix>/<sha[0:2]>/<sha>`, asked of s3rver behind the store's back. */
    const inBucket = async (digest: string) => {
      try {
        await s3
          .client()
          .send(new HeadObjectCommand({ Bucket: s3.bucket, Key: `${prefix}/${digest.slice(0, 2)}/${digest}` }));
        return true;
      } catch (error) {
        if ((error as Error).name === "NotFound") return false;
        throw error;
      }
    };

    it("stores source parts, output and artifacts in the bucket and serves them back through the API", async () => {
      const sources = new Sources(t.app, member.token);
      const lib = "pub fn answer() -> u32 { 42 }\n".repeat(40);
      const archive = archiveOf(
        [
          { path: "Cargo.toml", content: '[package]\nname = "widget"\nversion = "0.1.0"\nedition = "2021"\n' },
          { path: "rust-toolchain.toml", content: '[toolchain]\nchannel = "nightly"\n' },
          { path: "src/lib.rs", content: lib },
        ],
        [],
        { partBytes: 512 },
      );
      assert.ok(archive.parts.length > 2, "the archive spans several parts");

      // Upload: each part lands in the bucket under its digest; verification reads them from there.
      const completed = await sources.upload(archive, "s3-upload");
      assert.equal(completed.status, 200, completed.body);
      assert.equal(completed.json().state, "verified");
      for (const part of archive.parts) assert.ok(await inBucket(sha256(part)), "the part is in the bucket");

      // A second upload of the same archive: the service finds every part already held (has → HEAD).
      const again = await sources.reserve(archive.reservation, "s3-upload-again");
      assert.equal(again.status, 200, again.body);
      for (const [index, part] of archive.parts.entries()) {
        const check = await sources.check("s3-upload-again", index + 1, sha256(part));
        assert.equal(check.status, 200, check.body);
        assert.equal(check.json().present, true, `part ${index + 1} is already held`);
      }

      // Admission reads rust-toolchain.toml out of the bucket: the pinned channel is its content.
      const submitted = await t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(member.token), "content-type": "application/json", "idempotency-key": "s3-job" },
        payload: JSON.stringify(archiveSubmission("s3-upload", archive.manifestSha256)),
      });
      assert.equal(submitted.statusCode, 200, submitted.body);
      const jobId = submitted.json() as string;
      const evidence = await t.app.inject({
        method: "GET",
        url: `/api/jobs/${jobId}/evidence`,
        headers: bearer(member.token),
      });
      assert.equal(evidence.statusCode, 200, evidence.body);
      assert.deepEqual(
        [evidence.json().report.admitted.toolchain, evidence.json().report.admitted.toolchain_origin],
        ["nightly", "rust-toolchain-file"],
      );

      // A host materializing the job fetches its parts through the host service, from the bucket.
      const service = new HostService({
        storage: t.storage,
        blobs,
        clock: t.clock,
        log: silentLogger,
        onEvent: () => {},
      });
      for (const part of archive.parts) assert.ok((await service.fetchBlob(sha256(part))).equals(part));

      // The attempt publishes its Cargo output and an artifact to the bucket; both download through the API.
      const output = Buffer.from("   Compiling widget v0.1.0 (/work)\n    Finished `test` profile\n");
      const artifact = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46]), Buffer.alloc(70_000, 7)]);
      const lease = await claimJob(t.storage, jobId, t.clock.now());
      await finishJob(t.storage, blobs, lease, {
        now: t.clock.now(),
        cargoOutput: output,
        artifacts: [{ path: "release/widget", bytes: artifact }],
      });
      assert.ok(await inBucket(sha256(output)));
      assert.ok(await inBucket(sha256(artifact)));
      const get = (url: string) => t.app.inject({ method: "GET", url, headers: bearer(member.token) });
      const downloaded = await get(`/api/jobs/${jobId}/artifacts/${lease.attempt}/0`);
      assert.equal(downloaded.statusCode, 200, downloaded.body);
      assert.equal(downloaded.headers["content-length"], String(artifact.length));
      assert.ok(downloaded.rawPayload.equals(artifact), "the artifact's bytes, from the bucket");
      const cargoOutput = await get(`/api/jobs/${jobId}/attempts/${lease.attempt}/cargo-output`);
      assert.equal(cargoOutput.statusCode, 200, cargoOutput.body);
      assert.ok(cargoOutput.rawPayload.equals(output));

      // Output gone from the bucket (a lifecycle rule, a wrong bucket): not_found, not someone else's bytes.
      await s3.client().send(
        new DeleteObjectCommand({
          Bucket: s3.bucket,
          Key: `${prefix}/${sha256(output).slice(0, 2)}/${sha256(output)}`,
        }),
      );
      const gone = await get(`/api/jobs/${jobId}/attempts/${lease.attempt}/cargo-output`);
      assert.equal(gone.statusCode, 404, gone.body);
      assert.equal(gone.json().code, "not_found");
    });

    it("is ready on a reachable bucket; refuses with blob_store_unwritable on a bucket that does not exist", async () => {
      const operator = await operatorClient(t.app, t.storage, t.clock.now());
      const states = await operator.get("/operator/api/platform/states");
      assert.equal(states.statusCode, 200, states.body);
      assert.equal(states.json().management_readiness.reason.code, "ready");

      const missing = await testApp(await dialect.openFresh(), {
        blobs: S3BlobStore.at(
          { bucket: "no-such-bucket", prefix, endpoint: s3.endpoint, region: "us-east-1", forcePathStyle: true },
          { clientConfig: { credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } } },
        ),
      });
      try {
        const other = await operatorClient(missing.app, missing.storage, missing.clock.now());
        const refused = (await other.get("/operator/api/platform/states")).json().management_readiness;
        assert.deepEqual([refused.state, refused.reason.code], ["refusing", "blob_store_unwritable"]);
        assert.match(refused.reason.detail, /s3:\/\/no-such-bucket\//, "names the bucket, no credential");
      } finally {
        await missing.close();
      }
    });
  });
}

/**
 * Real cargo in the real sandbox on the embedded host, every blob in the bucket: the host
 * materializes the workspace from the parts it fetches out of S3 and publishes the artifact
 * and Cargo output there; the API serves them back. (SQLite: the embedded default; the blob
 * path is the same on either dialect, which the suite above runs.)
 */
describe("a real cargo job with its blobs in S3-compatible storage (embedded)", () => {
  const prefix = "embedded";
  let embedded: Embedded;
  before(async () => {
    embedded = await startEmbedded({ blobs: s3.store(prefix) });
  });
  after(() => embedded.close());

  it("builds from parts held in the bucket and publishes its artifact there; the bytes download", async () => {
    const archive = archiveOf(
      [
        { path: "Cargo.toml", content: '[package]\nname = "bucketcrate"\nversion = "0.1.0"\nedition = "2021"\n' },
        { path: "src/lib.rs", content: `pub fn answer() -> u32 { 42 }\n${"// padding\n".repeat(60)}` },
      ],
      [],
      { partBytes: 256 },
    );
    assert.ok(archive.parts.length > 1, "the crate spans several parts");
    const completed = await new Sources(embedded.app, embedded.token).upload(archive, "s3-cargo-upload");
    assert.equal(completed.status, 200, completed.body);
    const submitted = await embedded.jobs.api("POST", "/api/v4/jobs", {
      key: "s3-cargo-job",
      body: archiveSubmission("s3-cargo-upload", archive.manifestSha256, {
        operation: "build",
        artifacts: ["debug/libbucketcrate.rlib"],
      }),
    });
    assert.equal(submitted.status, 200, submitted.body);
    const id = submitted.json() as string;
    const job = await embedded.jobs.settle(id);
    assert.equal(job.status, "passed", await explainJob(embedded.jobs, id));

    const inventory = await embedded.jobs.api("GET", `/api/jobs/${id}/artifacts`);
    const [file] = inventory.json().publications[0].files as { path: string; bytes: number; sha256: string }[];
    assert.equal(file?.path, "debug/libbucketcrate.rlib");
    const key = `${prefix}/${file.sha256.slice(0, 2)}/${file.sha256}`;
    const head = await s3.client().send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }));
    assert.equal(head.ContentLength, file.bytes, "the host published the artifact into the bucket");
    const bytes = await embedded.app.inject({
      method: "GET",
      url: `/api/jobs/${id}/artifacts/1/0`,
      headers: bearer(embedded.token),
    });
    assert.equal(bytes.statusCode, 200, bytes.body);
    assert.equal(sha256(bytes.rawPayload), file.sha256);
    const output = await embedded.app.inject({
      method: "GET",
      url: `/api/jobs/${id}/attempts/1/cargo-output`,
      headers: bearer(embedded.token),
    });
    assert.equal(output.statusCode, 200, output.body);
    assert.match(output.body, /Compiling bucketcrate v0\.1\.0/);
  });
});

describe("KILN_BLOB_URL in the server's configuration", () => {
  it("unset keeps blobs as local files; set names the bucket; a bad one stops the start with the setting named", () => {
    assert.equal(configFromEnv({}).blobLocation, undefined);
    assert.equal(configFromEnv({ KILN_BLOB_URL: "  " }).blobLocation, undefined);
    assert.deepEqual(configFromEnv({ KILN_BLOB_URL: "s3://kiln-prod/blobs?region=eu-west-1" }).blobLocation, {
      bucket: "kiln-prod",
      prefix: "blobs",
      endpoint: undefined,
      region: "eu-west-1",
      forcePathStyle: false,
    });
    assert.throws(
      () => configFromEnv({ KILN_BLOB_URL: "s3://AKIA:secret@kiln-prod/blobs" }),
      /KILN_BLOB_URL must not carry credentials/,
    );
  });
});
