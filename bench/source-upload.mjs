#!/usr/bin/env node
// Source upload benchmark: the kiln CLI's archive builder and uploader against a real
// `kiln-server serve` process on loopback.
//
//   npm run build && node bench/source-upload.mjs [--mb 64] [--runs 3] [--concurrency 4] [--json FILE]
//
// 1. Generates a workspace of at least --mb MB (default 64): many small source files in many
//    directories plus some large binary files, all random (incompressible).
// 2. A warm-up upload of a small other tree, so the server is in its steady state.
// 3. First upload: capture + hash (buildArchive), then reserve / chunk.put / complete
//    (uploadArchive) of bytes the server has never seen. Throughput = part bytes sent
//    divided by the upload's wall time (reserve to complete), and end to end including hashing.
// 4. Baselines in the same run: the same part bytes POSTed with the same concurrency and the
//    CLI's own transport to a trivial Node HTTP server on loopback that only drains the body,
//    and `cp -r` of the tree.
// 5. The same amount of fresh bytes as 4 MiB random files only (per byte vs per request cost),
//    with its own plain-POST baseline.
// 6. One-file edit: a line appended to one source file, re-captured and uploaded: bytes sent as
//    a % of the workspace's bytes (goal ≤ 1 %), as the CLI sends it (the first upload's packs
//    kept, only the edited file packed anew) and as a machine without that layout would (the
//    fresh layout: the edited file's whole pack). Also a one-byte edit inside a large file.
//
// The bench removes its scratch trees only at the end: on this VM's ext4 (no journal) creating
// files is slow for minutes after bulk deletions, so for steady numbers start it with the disk
// quiet (docs/benchmarks.md).
//
// The server is a separate process (KILN_LOCAL_HOST=off: no job runs, only the sources
// operations are measured); its tenant, person, token and repository are created through its
// storage (SQLite in the data dir) the way the server's own tests do.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  appendFileSync,
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { createServer } from "node:http";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { requireBuilt, root } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";
import { log } from "./support/output.mjs";
import { upperMedian as median } from "./support/statistics.mjs";

const dist = (pkg, path) => join(root, "packages", pkg, "dist", path);
requireBuilt(dist("cli", "src/archive/upload.js"), dist("server", "src/testing/harness.js"));
const { captureWorkspace } = await import(dist("cli", "src/archive/capture.js"));
const { buildArchive, readPart } = await import(dist("cli", "src/archive/layout.js"));
const { uploadArchive } = await import(dist("cli", "src/archive/upload.js"));
const { cliFetch, createCliClient } = await import(dist("cli", "src/http-fetch.js"));
const { onboardRepository, openStorage } = await import("@kiln/storage");
const { personWithToken } = await import(dist("server", "src/testing/harness.js"));
const TARGET_MB = Number(option("mb", "64"));
const RUNS = Number(option("runs", "3"));
const CONCURRENCY = Number(option("concurrency", "4"));
const JSON_OUT = option("json", null);
const MB = 1024 * 1024;
// A full collection before each measured upload, so a run does not pay for the previous
// run's garbage (archives and buffers of tens of MB) in the middle of its own measurement.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc");

// ------------------------------------------------------------------ workspace

function generateWorkspace(dir, targetBytes) {
  const write = (path, data) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), data);
  };
  write("Cargo.toml", '[workspace]\nmembers = ["crates/*"]\nresolver = "2"\n');
  let bytes = 0;
  // 8 large files of 3 to 6 MiB (random: incompressible).
  for (let i = 0; i < 8; i++) {
    const data = randomBytes((3 + (i % 4)) * MB + i * 1013);
    write(`assets/blob${i}.bin`, data);
    bytes += data.length;
  }
  // Many source files: 40 crates × 6 modules directories × 12 files of 1 to 24 KiB of random text.
  let files = 0;
  for (let c = 0; bytes < targetBytes; c++) {
    write(`crates/c${c}/Cargo.toml`, `[package]\nname = "c${c}"\nversion = "0.1.0"\nedition = "2021"\n`);
    for (let m = 0; m < 6 && bytes < targetBytes; m++) {
      for (let f = 0; f < 12; f++) {
        const size = 1024 + ((c * 97 + m * 31 + f * 7919) % (23 * 1024));
        const text = `// c${c}/m${m}/f${f}\n${randomBytes(Math.ceil((size * 3) / 4))
          .toString("base64")
          .slice(0, size)}\n`;
        write(`crates/c${c}/src/m${m}/f${f}.rs`, text);
        bytes += text.length;
        files += 1;
      }
    }
  }
  return { bytes, files };
}

// ------------------------------------------------------------------ server

async function startServer(dataDir) {
  // KILN_BENCH_SERVER_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") profiles the server.
  const nodeArgs = (process.env.KILN_BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, dist("server", "src/main.js"), "serve"], {
    env: {
      ...process.env,
      KILN_LISTEN: "127.0.0.1:0",
      KILN_DATA_DIR: dataDir,
      KILN_LOCAL_HOST: "off",
      KILN_LOG_LEVEL: process.env.KILN_BENCH_SERVER_LOG_LEVEL ?? "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stderr.on("data", (c) => {
    out += c;
  });
  const url = await new Promise((resolve, reject) => {
    child.stdout.on("data", (c) => {
      out += c;
      const m = /serving (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`kiln-server exited ${code}: ${out}`)));
  });
  return {
    url,
    stop: () =>
      new Promise((r) => {
        child.once("exit", () => {
          // KILN_BENCH_SERVER_LOG=FILE keeps the server's output (with KILN_BENCH_SERVER_LOG_LEVEL=info: per request times).
          if (process.env.KILN_BENCH_SERVER_LOG) writeFileSync(process.env.KILN_BENCH_SERVER_LOG, out);
          r();
        });
        child.kill("SIGTERM");
      }),
  };
}

// ------------------------------------------------------------------ baselines

/** POSTs every part's bytes to a Node HTTP server that drains them, with the same concurrency. */
async function plainPost(archive) {
  const server = createServer((req, res) => {
    req.on("data", () => {});
    req.on("end", () => {
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  const started = process.hrtime.bigint();
  let next = 0;
  let bytes = 0;
  const worker = async () => {
    while (next < archive.sources.length) {
      const source = archive.sources[next++];
      const body = readPart(source);
      // The CLI's own transport (node:http, keep-alive), so the ratio is kiln's server cost.
      const answer = await cliFetch(`http://127.0.0.1:${port}/part/${source.part}`, {
        method: "POST",
        body,
        headers: { "content-type": "application/octet-stream" },
      });
      await answer.arrayBuffer();
      bytes += body.length;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  server.close();
  return { bytes, seconds };
}

/**
 * Scratch trees are removed when the bench ends, not between runs: on an ext4 file system
 * without a journal (this VM's), creating a file scans the inodes deleted in the last minutes,
 * so removing 60 MB of small files just before a run slows that run's file creation (the
 * server's blobs, the next workspace) by an amount that depends on the bench's own cleanup.
 */
const leftovers = [];

function copyTree(from) {
  const to = mkdtempSync(join(tmpdir(), "kiln-bench-cp-"));
  leftovers.push(to);
  const started = process.hrtime.bigint();
  execFileSync("cp", ["-r", `${from}/.`, to]);
  return Number(process.hrtime.bigint() - started) / 1e9;
}

// ------------------------------------------------------------------ run

const samples = [];
for (let run = 1; run <= RUNS; run++) {
  const scratch = mkdtempSync(join(tmpdir(), "kiln-bench-upload-"));
  const ws = join(scratch, "ws");
  const dataDir = join(scratch, "data");
  const generated = generateWorkspace(ws, TARGET_MB * 1000 * 1000);
  const server = await startServer(dataDir);
  try {
    const storage = await openStorage({ dataDir });
    const member = await personWithToken(storage, { role: "member", now: new Date() });
    const repository = `bench/upload${run}`;
    await onboardRepository(storage, { tenantId: member.tenant, name: repository, onboardedBy: "bench" }, new Date());
    await storage.close();
    const client = createCliClient({ endpoint: server.url, token: member.token });

    // Warm-up: one small upload of other bytes first, so the measured uploads meet a server in
    // its steady state (JIT-compiled, validators built) rather than a process seconds old.
    // Its manifest is as long as the measured one's (as many files, of a few hundred bytes), so
    // the per-entry code paths are optimized, as in a service that has taken uploads before.
    const warmWs = join(scratch, "warm");
    for (let i = 0; i < generated.files; i++) {
      mkdirSync(join(warmWs, `d${i % 64}`), { recursive: true });
      writeFileSync(join(warmWs, `d${i % 64}/f${i}.rs`), randomBytes(300).toString("base64"));
    }
    writeFileSync(join(warmWs, "big.bin"), randomBytes(4 * MB + 1));
    await uploadArchive(client, { repository, archive: buildArchive(captureWorkspace(warmWs, { git: false })) });

    collectGarbage();
    const loadBefore = loadavg()[0];
    const t0 = process.hrtime.bigint();
    const archive = buildArchive(captureWorkspace(ws, { git: false }));
    const hashSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const first = await uploadArchive(client, { repository, archive, concurrency: CONCURRENCY });
    const totalSeconds = Number(process.hrtime.bigint() - t0) / 1e9;

    const plain = await plainPost(archive);
    const cpSeconds = copyTree(ws);

    // One-file edit of a source file: first as a machine without the kept layout would send
    // it (the fresh layout: the edited file's whole pack), then as the CLI does after a verified
    // upload (the kept packs reused, only the edited file packed anew).
    const edited = `crates/c3/src/m2/f5.rs`;
    appendFileSync(join(ws, edited), "// one-file edit\n");
    const editedCapture = captureWorkspace(ws, { git: false });
    const smallFresh = await uploadArchive(client, {
      repository,
      archive: buildArchive(editedCapture),
      concurrency: CONCURRENCY,
    });
    const afterSmall = buildArchive(editedCapture, archive.packs);
    const small = await uploadArchive(client, { repository, archive: afterSmall, concurrency: CONCURRENCY });
    // One byte changed inside a large file.
    const fd = openSync(join(ws, "assets/blob2.bin"), "r+");
    const byte = Buffer.alloc(1);
    readSync(fd, byte, 0, 1, 5 * MB - 17);
    writeSync(fd, Buffer.from([byte[0] ^ 0xff]), 0, 1, 5 * MB - 17);
    closeSync(fd);
    const afterLarge = buildArchive(captureWorkspace(ws, { git: false }), afterSmall.packs);
    const large = await uploadArchive(client, { repository, archive: afterLarge, concurrency: CONCURRENCY });
    // Per byte versus per request: the same amount of fresh bytes in 4 MiB parts only.
    const bigWs = join(scratch, "big");
    for (let i = 0; i < Math.ceil(archive.totals.file_bytes / (4 * MB)); i++) {
      mkdirSync(bigWs, { recursive: true });
      writeFileSync(join(bigWs, `blob${i}.bin`), randomBytes(4 * MB));
    }
    const bigArchive = buildArchive(captureWorkspace(bigWs, { git: false }));
    collectGarbage();
    const bigUpload = await uploadArchive(client, { repository, archive: bigArchive, concurrency: CONCURRENCY });
    const bigPlain = await plainPost(bigArchive);
    const loadAfter = loadavg()[0];

    const sample = {
      run,
      workspace_bytes: archive.totals.file_bytes,
      files: archive.totals.entries,
      parts: archive.totals.parts,
      hash_seconds: hashSeconds,
      first: {
        ...first,
        mb_per_s: first.bytes_sent / MB / first.seconds,
        end_to_end_mb_per_s: first.bytes_sent / MB / totalSeconds,
      },
      plain_post: { ...plain, mb_per_s: plain.bytes / MB / plain.seconds },
      cp_seconds: cpSeconds,
      cp_mb_per_s: archive.totals.file_bytes / MB / cpSeconds,
      small_edit: { ...small, percent: (100 * small.bytes_sent) / archive.totals.file_bytes },
      small_edit_without_kept_layout: {
        ...smallFresh,
        percent: (100 * smallFresh.bytes_sent) / archive.totals.file_bytes,
      },
      large_edit: { ...large, percent: (100 * large.bytes_sent) / archive.totals.file_bytes },
      large_parts_only: { ...bigUpload, mb_per_s: bigUpload.bytes_sent / MB / bigUpload.seconds },
      large_parts_plain_post: { ...bigPlain, mb_per_s: bigPlain.bytes / MB / bigPlain.seconds },
      load: [loadBefore, loadAfter],
    };
    samples.push(sample);
    log(
      `run ${run}: ${(sample.workspace_bytes / MB).toFixed(1)} MiB, ${sample.files} files, ${sample.parts} parts; ` +
        `hash ${hashSeconds.toFixed(2)} s; upload ${first.seconds.toFixed(2)} s = ${sample.first.mb_per_s.toFixed(0)} MiB/s ` +
        `(with hashing ${sample.first.end_to_end_mb_per_s.toFixed(0)} MiB/s); plain POST ${sample.plain_post.mb_per_s.toFixed(0)} MiB/s; ` +
        `cp ${sample.cp_mb_per_s.toFixed(0)} MiB/s; small edit re-sent ${small.bytes_sent} B (${sample.small_edit.percent.toFixed(3)} %, ` +
        `${small.parts_sent} parts; without the kept layout ${smallFresh.bytes_sent} B, ` +
        `${sample.small_edit_without_kept_layout.percent.toFixed(2)} %); large edit ${large.bytes_sent} B (${sample.large_edit.percent.toFixed(2)} %); ` +
        `4 MiB parts only: ${bigUpload.parts_sent} parts at ${sample.large_parts_only.mb_per_s.toFixed(0)} MiB/s ` +
        `(${(bigUpload.bytes_sent / 1e6 / bigUpload.seconds).toFixed(0)} MB/s; plain POST ${sample.large_parts_plain_post.mb_per_s.toFixed(0)} MiB/s)`,
    );
    if (generated.files === 0) throw new Error("no files generated");
  } finally {
    await server.stop();
    leftovers.push(scratch);
  }
}
for (const dir of leftovers) rmSync(dir, { recursive: true, force: true });

const summary = {
  machine: {
    cpus: cpus().length,
    model: cpus()[0]?.model,
    memory_gib: Math.round(totalmem() / 2 ** 30),
    node: process.version,
  },
  concurrency: CONCURRENCY,
  runs: RUNS,
  median: {
    workspace_mib: median(samples.map((s) => s.workspace_bytes / MB)),
    upload_mib_per_s: median(samples.map((s) => s.first.mb_per_s)),
    upload_with_hashing_mib_per_s: median(samples.map((s) => s.first.end_to_end_mb_per_s)),
    plain_post_mib_per_s: median(samples.map((s) => s.plain_post.mb_per_s)),
    cp_mib_per_s: median(samples.map((s) => s.cp_mb_per_s)),
    upload_vs_plain_post: median(samples.map((s) => s.first.mb_per_s / s.plain_post.mb_per_s)),
    small_edit_percent: median(samples.map((s) => s.small_edit.percent)),
    small_edit_bytes: median(samples.map((s) => s.small_edit.bytes_sent)),
    small_edit_without_kept_layout_percent: median(samples.map((s) => s.small_edit_without_kept_layout.percent)),
    large_edit_percent: median(samples.map((s) => s.large_edit.percent)),
    large_parts_only_mib_per_s: median(samples.map((s) => s.large_parts_only.mb_per_s)),
    large_parts_plain_post_mib_per_s: median(samples.map((s) => s.large_parts_plain_post.mb_per_s)),
  },
  goals: {
    "fresh bytes ≥ 200 MB/s (4 MiB parts)":
      median(samples.map((s) => s.large_parts_only.bytes_sent / 1e6 / s.large_parts_only.seconds)) >= 200,
    "fresh bytes ≥ 200 MB/s (source tree: small files in packs, large files)":
      median(samples.map((s) => s.first.bytes_sent / 1e6 / s.first.seconds)) >= 200,
    "one-file edit ≤ 1 % (the CLI: kept layout)": median(samples.map((s) => s.small_edit.percent)) <= 1,
  },
};
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ summary, samples }, null, 2));
