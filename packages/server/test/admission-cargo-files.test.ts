/**
 * The Cargo files jobs.submit's admission reads (issue 33): bounded before anything is read —
 * refused `invalid_request` naming the file and the bound — and parsed on a body worker, with
 * the same decisions as on the event loop.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { readJob } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import {
  MAX_CARGO_FILE_BYTES,
  MAX_CARGO_LOCK_BYTES,
  refuseOversizedCargoFiles,
} from "../src/domain/jobs/admission-source.js";
import { MAX_TOML_DEPTH, parseTomlDocument } from "../src/domain/jobs/toml-document.js";
import { bearer } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { archiveOf, archiveSubmission, Sources } from "./source-archives.js";
import { type WorkerAndLoopApps, workerAndLoopApps } from "./worker-and-loop-apps.js";

const REPOSITORY = "acme/widget";
const MANIFEST = '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n';

/** A Cargo.toml of exactly `bytes` bytes: a real manifest, then comment lines. */
function paddedManifest(bytes: number): Buffer {
  const line = "# padding to a size no real manifest reaches, line after line\n";
  const padding = line.repeat(Math.ceil((bytes - MANIFEST.length) / line.length));
  return Buffer.from(MANIFEST + padding).subarray(0, bytes);
}

const inlineFile = (path: string, content: Buffer | string) => ({
  path,
  bytes: [...Buffer.from(content)],
  executable: false,
});

/** `cargo build` of an inline source of `files` (job-fixtures' body with other files). */
function withFiles(files: ReturnType<typeof inlineFile>[]) {
  const body = inlineSubmission(REPOSITORY, "build");
  return { ...body, workspace: { ...body.workspace, source: { files } } };
}

describe("the bounds of the Cargo files admission reads", () => {
  const refusal = (path: string, bytes: number) => {
    try {
      refuseOversizedCargoFiles([
        { path: "src/lib.rs", bytes: 100 * MAX_CARGO_LOCK_BYTES },
        { path, bytes },
      ]);
      return null;
    } catch (error) {
      return (error as Error).message;
    }
  };

  it("refuses each kind past its bound, naming the file, its size and the bound", () => {
    for (const path of [
      "Cargo.toml",
      "crates/a/Cargo.toml",
      ".cargo/config.toml",
      "crates/a/.cargo/config",
      "rust-toolchain",
      "sub/rust-toolchain.toml",
    ]) {
      assert.equal(refusal(path, MAX_CARGO_FILE_BYTES), null, path);
      assert.equal(
        refusal(path, MAX_CARGO_FILE_BYTES + 1),
        `body.workspace.source: ${path} is ${MAX_CARGO_FILE_BYTES + 1} bytes; kiln admits ${
          path.endsWith("Cargo.toml")
            ? "a Cargo manifest"
            : path.includes(".cargo/")
              ? "a Cargo configuration file"
              : "a toolchain file"
        } of at most 1048576 bytes (1 MiB), far beyond any real one. Shrink it, or leave it out of the captured workspace, and submit again`,
      );
    }
    assert.equal(refusal("Cargo.lock", MAX_CARGO_LOCK_BYTES), null);
    assert.match(
      refusal("vendor/x/Cargo.lock", MAX_CARGO_LOCK_BYTES + 1) ?? "",
      /^body\.workspace\.source: vendor\/x\/Cargo\.lock is 4194305 bytes; kiln admits a Cargo lockfile of at most 4194304 bytes \(4 MiB\)/,
    );
  });

  it("answers a TOML file nested deeper than its bound as one that does not parse", () => {
    const nested = (levels: number) => Buffer.from(`${Array.from({ length: levels }, () => "a").join(".")} = 1\n`);
    // A dotted key of n parts is n - 1 tables deep, and its value one more.
    assert.ok("toml" in parseTomlDocument(nested(MAX_TOML_DEPTH)));
    assert.deepEqual(parseTomlDocument(nested(MAX_TOML_DEPTH + 2)), {
      error: `tables or arrays nested deeper than ${MAX_TOML_DEPTH} levels`,
    });
  });

  it("leaves other files alone, whatever their size or a name like a Cargo file's", () => {
    for (const path of ["config.toml", "src/config", "notcargo/config.toml", "Cargo.toml.orig", "src/lib.rs"]) {
      assert.equal(refusal(path, 100 * MAX_CARGO_LOCK_BYTES), null, path);
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`jobs.submit bounds and parses the Cargo files it reads off the event loop (${dialect.name})`, {
    skip: dialect.skip,
  }, () => {
    let apps: WorkerAndLoopApps;
    let keys = 0;
    before(async () => {
      apps = await workerAndLoopApps(await dialect.openFresh(), REPOSITORY);
    });
    after(() => apps.close());

    const submit = async (app: FastifyInstance, body: unknown) => {
      const res = await app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(apps.member.token), "content-type": "application/json", "idempotency-key": `k-${++keys}` },
        payload: JSON.stringify(body),
      });
      return { status: res.statusCode, body: res.body, json: () => JSON.parse(res.body) };
    };

    it("a streamed archive with a 50 MB Cargo.toml is refused naming the bound; the upload stays unclaimed", async () => {
      const sources = new Sources(apps.t.app, apps.member.token);
      const huge = paddedManifest(50 * 1024 * 1024);
      const archive = archiveOf(
        [
          { path: "Cargo.toml", content: huge },
          { path: "src/lib.rs", content: "pub fn f() {}\n" },
        ],
        [],
        { repository: REPOSITORY },
      );
      const uploaded = await sources.upload(archive, "up-huge-manifest");
      assert.equal(uploaded.status, 200, uploaded.body);
      const parsed = apps.large.pool?.tomlFilesParsed ?? 0;
      const refused = await submit(apps.t.app, archiveSubmission("up-huge-manifest", archive.manifestSha256));
      assert.equal(refused.status, 400, refused.body);
      assert.equal(refused.json().code, "invalid_request");
      assert.equal(
        refused.json().detail,
        `body.workspace.source: Cargo.toml is ${huge.length} bytes; kiln admits a Cargo manifest of at most 1048576 bytes (1 MiB), far beyond any real one. Shrink it, or leave it out of the captured workspace, and submit again`,
      );
      assert.equal(apps.large.pool?.tomlFilesParsed, parsed, "a refused file is never parsed");
      const upload = (await sources.status("up-huge-manifest")).json();
      assert.equal(upload.state, "verified");
      assert.equal(upload.admission.claimed, false);
    });

    it("an inline Cargo.toml at the bound is admitted, one byte past it refused", async () => {
      const at = await submit(
        apps.t.app,
        withFiles([inlineFile("Cargo.toml", paddedManifest(MAX_CARGO_FILE_BYTES)), inlineFile("src/lib.rs", "")]),
      );
      assert.equal(at.status, 200, at.body.slice(0, 300));
      const past = await submit(
        apps.t.app,
        withFiles([
          inlineFile(".cargo/config.toml", paddedManifest(MAX_CARGO_FILE_BYTES + 1)),
          inlineFile("Cargo.toml", MANIFEST),
          inlineFile("src/lib.rs", ""),
        ]),
      );
      assert.equal(past.status, 400, past.body);
      assert.equal(past.json().code, "invalid_request");
      assert.match(
        past.json().detail,
        /^body\.workspace\.source: \.cargo\/config\.toml is 1048577 bytes; kiln admits a Cargo configuration file of at most 1048576 bytes \(1 MiB\)/,
      );
    });

    it("a Cargo.toml nested thousands of levels deep decides nothing, and the workers go on", async () => {
      // 6 KB of dotted key, 3,000 tables deep: copied between threads as parsed, it overflowed the
      // stack of the thread receiving it, and the worker never answered again.
      const deep = `${MANIFEST}\n[package.metadata]\n${Array.from({ length: 3000 }, () => "b").join(".")} = 1\n`;
      const parsed = apps.large.pool?.tomlFilesParsed ?? 0;
      const submitted = await submit(
        apps.t.app,
        withFiles([inlineFile("Cargo.toml", deep), inlineFile("src/lib.rs", "")]),
      );
      assert.equal(submitted.status, 200, submitted.body);
      assert.equal(apps.large.pool?.tomlFilesParsed, parsed + 1);
      const record = await readJob(apps.t.storage, { tenantId: apps.member.tenant, jobId: submitted.json() });
      const admitted = JSON.parse(record?.job.admitted ?? "null");
      assert.equal(
        admitted.network_policy_reason,
        "no Cargo.toml is readable on the working directory's path; cargo will say why",
      );
      const next = await submit(
        apps.t.app,
        withFiles([inlineFile("Cargo.toml", MANIFEST), inlineFile("src/lib.rs", "")]),
      );
      assert.equal(next.status, 200, next.body);
      assert.equal(apps.large.pool?.tomlFilesParsed, parsed + 2);
    });

    it("each TOML file is parsed once, on a body worker, and admission decides as it does on the event loop", async () => {
      const body = withFiles([
        inlineFile(".cargo/config.toml", "[build]\njobs = 3\n"),
        inlineFile("Cargo.toml", `${MANIFEST}\n[dependencies]\nitoa = "1"\n\n[profile.dev]\ndebug = 0\n`),
        inlineFile("rust-toolchain.toml", '[toolchain]\nchannel = "nightly"\n'),
        inlineFile("src/lib.rs", ""),
      ]);
      const parsed = apps.large.pool?.tomlFilesParsed ?? 0;
      const viaWorker = await submit(apps.t.app, body);
      assert.equal(viaWorker.status, 200, viaWorker.body);
      // Cargo.toml and .cargo/config.toml are read by the settings and the network policy, and
      // rust-toolchain.toml for the toolchain: three files, each parsed once.
      assert.equal(apps.large.pool?.tomlFilesParsed, parsed + 3);
      const viaLoop = await submit(apps.onLoop, body);
      assert.equal(viaLoop.status, 200, viaLoop.body);
      assert.equal(apps.large.pool?.tomlFilesParsed, parsed + 3, "the app without workers parsed on its loop");

      const admitted = async (jobId: string) => {
        const record = await readJob(apps.t.storage, { tenantId: apps.member.tenant, jobId });
        return JSON.parse(record?.job.admitted ?? "null");
      };
      const worker = await admitted(viaWorker.json());
      assert.deepEqual(worker, await admitted(viaLoop.json()));
      assert.equal(worker.toolchain, "nightly");
      assert.equal(worker.toolchain_origin, "rust-toolchain-file");
      assert.equal(worker.network_policy, "dependency-gateway");
      assert.match(worker.network_policy_reason, /^itoa \(crates-io, in Cargo\.toml\)/);
      assert.deepEqual(
        worker.injections.map((i: { setting: string; status: string }) => `${i.setting} ${i.status}`),
        ["build.jobs not applied", "profile.dev.debug not applied"],
      );
    });
  });
}
