#!/usr/bin/env node
// Lineage placement: when a job's lineage lives on a host that is busy or gone, is it faster to
// run the job cold on another host, or to move the lineage there through object storage and run
// it warm? Measured in one run on regex 1.7.1 (Debian's librust-regex-dev sources), `cargo test`:
//
//   cold   — the first job of a new lineage (fresh target dir);
//   warm   — the same job again on its lineage (restore is a rename);
//   move   — the warm lineage's target dir packed with tar (sparse) into 64 MiB chunks, each put into the
//            S3 blob store (packages/storage/src/blobs, against s3rver on loopback), then read back
//            and unpacked into an empty target dir — once plain and once through zstd -1;
//   moved  — the job again on the moved target dir (is it really warm on arrival?).
//
//   npm run build && node bench/lineage-placement.mjs [--json FILE] [--chunk-mib 64]
//
// kiln runs in this process as `kiln-server serve` wires it (SQLite, local blobs, the embedded host
// with the sandbox executor), requests through Fastify's inject. Must run as root (the sandbox
// executor requires it). s3rver writes its objects to this machine's disk, the same one tar reads
// and writes: the move's figures include that contention, where a real bucket is across a network.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { dist, requireBuilt } from "./support/built-packages.mjs";
import { startInProcessKiln } from "./support/in-process-kiln.mjs";
import { inlineJob } from "./support/inline-job.mjs";
import { option } from "./support/options.mjs";
import { fmt, log } from "./support/output.mjs";
import { removeScratch, temp } from "./support/scratch.mjs";

requireBuilt(dist("src/build-app.js"), dist("src/testing/debian-crates.js"));
const { startS3TestServer } = await import("@kiln/storage/testing");
const { debianCrate, debianCrateInstalled } = await import(dist("src/testing/debian-crates.js"));

const JSON_OUT = option("json", null);
const CHUNK_BYTES = Number(option("chunk-mib", "64")) * 2 ** 20;
const CHUNKS_IN_FLIGHT = 4;
const SIZE = "kiln2-cpu";
const CGROUP_PARENT = `kiln-bench-${process.pid}`;
const seconds = (from) => Number(process.hrtime.bigint() - from) / 1e9;

if (!debianCrateInstalled("regex", "1.7.1"))
  throw new Error("apt-get install librust-regex-dev (npm test's setup does)");
const files = debianCrate("regex", "1.7.1");

// ---------------------------------------------------------------------------------------------
// kiln, wired like `kiln-server serve`

async function startKiln() {
  const kiln = await startInProcessKiln({ dataDir: temp("kiln-bench-placement-"), cgroupParentName: CGROUP_PARENT });
  const { app, auth, get } = kiln;
  let keys = 0;

  /** Submits, waits (woken by the job's notices) for the terminal status; the wall time and the cache outcome. */
  async function run(repository) {
    keys += 1;
    const started = process.hrtime.bigint();
    const res = await app.inject({
      method: "POST",
      url: "/api/v4/jobs",
      headers: { ...auth, "content-type": "application/json", "idempotency-key": `placement-${keys}` },
      payload: JSON.stringify(inlineJob(repository, SIZE, files)),
    });
    if (res.statusCode !== 200) throw new Error(`submission refused: ${res.body}`);
    const id = res.json();
    const job = await kiln.waitForTerminal(id, 250);
    const wall = seconds(started);
    if (job.status !== "passed") throw new Error(`job ${id} ${job.status}: ${JSON.stringify(job.failure)}`);
    const evidence = await get(`/api/jobs/${id}/evidence`);
    const cache = evidence.report.caches[0] ?? null;
    const crates = evidence.report.crates;
    return {
      seconds: wall,
      cache: cache && { outcome: cache.outcome, reason: cache.reason, saved_bytes: cache.saved_bytes },
      cratesCompiled: crates.filter((c) => c.outcome === "compiled").length,
      cratesFresh: crates.filter((c) => c.outcome === "fresh").length,
    };
  }

  return { run, get, lineageRoot: kiln.lineageRoot, onboard: kiln.onboard, stop: kiln.stop };
}

// ---------------------------------------------------------------------------------------------
// Moving a target dir through the blob store

/** Runs `command`, feeding nothing; resolves with its exit. */
function exited(child, what) {
  return new Promise((resolve, reject) => {
    let stderr = "";
    child.stderr?.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${what} exited ${code}: ${stderr}`))));
  });
}

/** Reads a stream in chunks of `bytes` (the last shorter). */
async function* chunksOf(stream, bytes) {
  let parts = [];
  let held = 0;
  for await (const data of stream) {
    let rest = data;
    while (held + rest.length >= bytes) {
      const take = bytes - held;
      parts.push(rest.subarray(0, take));
      yield Buffer.concat(parts);
      parts = [];
      held = 0;
      rest = rest.subarray(take);
    }
    if (rest.length > 0) {
      parts.push(rest);
      held += rest.length;
    }
  }
  if (held > 0) yield Buffer.concat(parts);
}

/** tar (optionally | zstd -1) of `dir` into content-addressed chunks in `store`; their digests in order. */
async function packAndUpload(store, dir, compress) {
  // --sparse: the target dir holds the attempt's disk image (a 256 GiB sparse ext4 file, the size's
  // disk quota); GNU tar finds its data by SEEK_DATA/SEEK_HOLE and sends only that, and unpacking
  // restores the holes.
  const tar = spawn("tar", ["-C", dir, "--sparse", "-cf", "-", "."], { stdio: ["ignore", "pipe", "pipe"] });
  const tarDone = exited(tar, "tar -c");
  let source = tar.stdout;
  let zstdDone = Promise.resolve();
  if (compress) {
    const zstd = spawn("zstd", ["-1", "-T0", "-q", "-c"], { stdio: ["pipe", "pipe", "pipe"] });
    tar.stdout.pipe(zstd.stdin);
    zstdDone = exited(zstd, "zstd");
    source = zstd.stdout;
  }
  const digests = [];
  const inFlight = new Set();
  let bytes = 0;
  for await (const chunk of chunksOf(source, CHUNK_BYTES)) {
    const index = digests.length;
    digests.push(null);
    bytes += chunk.length;
    const put = store.put(chunk).then((stored) => {
      digests[index] = stored.sha256;
      inFlight.delete(put);
    });
    inFlight.add(put);
    if (inFlight.size >= CHUNKS_IN_FLIGHT) await Promise.race(inFlight);
  }
  await Promise.all([...inFlight, tarDone, zstdDone]);
  return { digests, bytes };
}

/** The chunks read back in order (one ahead) and unpacked into `dir`. */
async function downloadAndUnpack(store, digests, dir, compress) {
  mkdirSync(dir, { recursive: true });
  const tar = spawn("tar", ["-C", dir, "-xf", "-"], { stdio: ["pipe", "ignore", "pipe"] });
  const tarDone = exited(tar, "tar -x");
  let sink = tar.stdin;
  let zstdDone = Promise.resolve();
  if (compress) {
    const zstd = spawn("zstd", ["-d", "-q", "-c"], { stdio: ["pipe", "pipe", "pipe"] });
    zstd.stdout.pipe(tar.stdin);
    zstdDone = exited(zstd, "zstd -d");
    sink = zstd.stdin;
  }
  let next = store.get(digests[0]);
  for (let i = 0; i < digests.length; i++) {
    const chunk = await next;
    if (i + 1 < digests.length) next = store.get(digests[i + 1]);
    if (!sink.write(chunk)) await new Promise((resolve) => sink.once("drain", resolve));
  }
  sink.end();
  await Promise.all([zstdDone, tarDone]);
}

function duBytes(dir) {
  return new Promise((resolve, reject) => {
    // Bytes on disk, not apparent size: the sparse disk image's apparent size is its 256 GiB.
    const du = spawn("du", ["-s", "--block-size=1", dir], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    du.stdout.on("data", (d) => {
      out += d;
    });
    du.on("close", (code) =>
      code === 0 ? resolve(Number(out.split("\t")[0])) : reject(new Error(`du exited ${code}`)),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// The run

const machine = {
  cpus: cpus().length,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  loadBefore: loadavg()[0],
};
log(`bench: ${machine.cpus} CPUs, ${machine.memoryGiB} GiB, load ${fmt(machine.loadBefore)} before the run`);

const kiln = await startKiln();
const s3 = await startS3TestServer();
const results = {};
try {
  const repository = await kiln.onboard(`bench/placement-${randomBytes(3).toString("hex")}`);
  log("bench: cold job (a new lineage)");
  results.cold = await kiln.run(repository);
  log(`  ${fmt(results.cold.seconds)} s, ${results.cold.cache?.outcome}`);
  log("bench: warm job (the same lineage)");
  results.warm = await kiln.run(repository);
  log(`  ${fmt(results.warm.seconds)} s, ${results.warm.cache?.outcome}`);
  if (results.cold.cache?.outcome !== "cold" || results.warm.cache?.outcome !== "warm") {
    throw new Error(`expected cold then warm: ${JSON.stringify([results.cold.cache, results.warm.cache])}`);
  }
  const lineage = (await kiln.get(`/api/repositories/${repository}`)).lineages[0]?.lineage;
  if (lineage === undefined) throw new Error("the warm job left no lineage");
  const slot = join(kiln.lineageRoot, lineage, "current", "target");
  results.targetBytes = await duBytes(slot);
  log(`bench: the lineage's target dir holds ${fmt(results.targetBytes / 2 ** 30)} GiB`);

  results.moves = [];
  for (const compress of [false, true]) {
    const store = s3.store(`lineage-moves/${compress ? "zstd" : "plain"}`, {});
    const packStarted = process.hrtime.bigint();
    const packed = await packAndUpload(store, slot, compress);
    const packSeconds = seconds(packStarted);
    const unpackInto = join(temp("kiln-bench-moved-"), "target");
    const unpackStarted = process.hrtime.bigint();
    await downloadAndUnpack(store, packed.digests, unpackInto, compress);
    const unpackSeconds = seconds(unpackStarted);
    const move = {
      compression: compress ? "zstd -1" : "none",
      chunks: packed.digests.length,
      storedBytes: packed.bytes,
      packUploadSeconds: packSeconds,
      downloadUnpackSeconds: unpackSeconds,
      totalSeconds: packSeconds + unpackSeconds,
      unpackedInto: unpackInto,
    };
    results.moves.push(move);
    log(
      `bench: move (${move.compression}): ${move.chunks} chunks, ${fmt(move.storedBytes / 2 ** 30)} GiB stored; ` +
        `tar+upload ${fmt(packSeconds)} s, download+untar ${fmt(unpackSeconds)} s`,
    );
  }

  // The job on the moved target dir: the slot's target replaced by what came back through S3.
  const moved = results.moves[0].unpackedInto;
  renameSync(slot, `${slot}.before-move`);
  renameSync(moved, slot);
  log("bench: the job on the moved target dir");
  results.moved = await kiln.run(repository);
  log(
    `  ${fmt(results.moved.seconds)} s, ${results.moved.cache?.outcome}, ${results.moved.cratesCompiled} crates compiled`,
  );
} finally {
  await kiln.stop();
  await s3.stop();
  removeScratch();
}

// ---------------------------------------------------------------------------------------------
// Report

const cold = results.cold.seconds;
const warm = results.warm.seconds;
const best = results.moves.reduce((a, b) => (a.totalSeconds <= b.totalSeconds ? a : b));
const moveThenWarm = best.totalSeconds + results.moved.seconds;
const rows = [
  ["cold build (new lineage)", cold, cold / cold],
  ["warm build (lineage on this host)", warm, warm / cold],
  ...results.moves.map((m) => [
    `move (${m.compression}): tar+upload+download+untar`,
    m.totalSeconds,
    m.totalSeconds / cold,
  ]),
  ["warm build on the moved target", results.moved.seconds, results.moved.seconds / cold],
  [`move (${best.compression}) + warm build on it`, moveThenWarm, moveThenWarm / cold],
];
const out = [];
out.push(`regex 1.7.1, cargo test, ${SIZE}; target dir ${fmt(results.targetBytes / 2 ** 30)} GiB`);
out.push("");
out.push("| path | seconds | × cold |");
out.push("| --- | ---: | ---: |");
for (const [name, s, ratio] of rows) out.push(`| ${name} | ${fmt(s)} | ${fmt(ratio)}× |`);
out.push("");
for (const m of results.moves) {
  out.push(
    `move (${m.compression}): ${m.chunks} chunks of ≤ ${CHUNK_BYTES / 2 ** 20} MiB, ${fmt(m.storedBytes / 2 ** 30)} GiB stored; ` +
      `tar+upload ${fmt(m.packUploadSeconds)} s, download+untar ${fmt(m.downloadUnpackSeconds)} s`,
  );
}
// Two ways to move. On demand: the holder packs and uploads when a job misses it (it must be
// alive, and busy hosts are why jobs miss it). Kept: the holder uploads after every save, so a
// copy is there even when it is gone; a miss then pays only the download half, but every save
// pays the upload half.
const onDemand = moveThenWarm;
const perMiss = best.downloadUnpackSeconds + results.moved.seconds;
const perSave = best.packUploadSeconds;
const saved = cold - perMiss;
const breakEven = saved > 0 ? perSave / saved : Number.POSITIVE_INFINITY;
out.push("");
out.push(
  `on demand: pack+upload+download+unpack+warm ${fmt(onDemand)} s vs cold ${fmt(cold)} s (${fmt(onDemand / cold)}×)`,
);
out.push(
  `kept after every save: a miss costs download+unpack+warm ${fmt(perMiss)} s (${fmt(perMiss / cold)}× cold); ` +
    `every save costs pack+upload ${fmt(perSave)} s; worth it when more than ${fmt(breakEven * 100, 0)} % of jobs miss their lineage host`,
);
out.push(`the wait bound by the ski-rental rule: cold − warm = ${fmt(cold - warm)} s`);
out.push(`load average after the run: ${fmt(loadavg()[0])}`);
process.stdout.write(`${out.join("\n")}\n`);
if (JSON_OUT) {
  writeFileSync(JSON_OUT, JSON.stringify({ machine, results, onDemand, perMiss, perSave, breakEven }, null, 2));
}
