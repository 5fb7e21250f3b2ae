#!/usr/bin/env node
// Large requests and the event loop: how long one tenant-sized request holds the server's one
// event loop, and what a small request of another tenant waits beside it (issue 22 H2, T15).
//
//   npm run build && node bench/large-requests.mjs [--runs 3] [--kind inline|manifest|both|cargo-toml] [--workers N]
//   node --cpu-prof --cpu-prof-dir=/tmp/prof bench/large-requests.mjs --runs 1   (a profile)
//
// One real app in this process on loopback (SQLite, no host), and for each kind of large
// request — jobs.submit with a 15 MB legacy inline source (5,000,000 byte integers) and
// sources.reserve with a 40,000-file manifest (about 7 MB) — sent from a child process (so the
// client's JSON and socket writes are not this loop's):
//
// - the request's wall time (sent to answered, as the client sees it);
// - the longest stall of this process's event loop while it ran (a 1 ms timer's worst lateness:
//   what any other request waits at worst), and the sum of stalls over 20 ms;
// - a quiet tenant's jobs.get sent every 10 ms alongside: its p50 and worst latency.
//
// `--kind cargo-toml` (issue 33; not in `both`): jobs.submit of a streamed archive whose Cargo.toml
// is 50 MB. Before each run the noisy client uploads the archive (reserve, parts, complete:
// outside the measurement); the run is the submission alone, whose admission reads the manifest,
// and the quiet tenant is watched for 3 s from its start (or until it is answered, if later).
//
// Ratios are against the same quiet jobs.get with no large request, measured in the same run.
// --workers is the app's body workers (default: the server's default; 0 reads every body on the
// event loop, as before issue 22 H2's fix).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { requireBuilt, root } from "./support/built-packages.mjs";
import { lineReader } from "./support/line-reader.mjs";
import { option } from "./support/options.mjs";
import { log } from "./support/output.mjs";

const dist = (pkg, path) => join(root, "packages", pkg, "dist", path);
requireBuilt(dist("server", "src/testing/harness.js"));

const CLIENT = "KILN_BENCH_LARGE_CLIENT";
if (process.env[CLIENT] !== undefined) {
  // A client process: `inline` and `manifest` send one large request (the noisy tenant's);
  // `quiet <job> <token>` sends jobs.get every 10 ms (open loop) until `stop`, then prints the
  // latencies. Bodies are built once, before `ready`.
  const { inlineSubmission } = await import(dist("server", "src/testing/job-fixtures.js"));
  const { archiveOf, archiveSubmission } = await import(dist("server", "test/source-archives.js"));
  const { base, token, repository } = JSON.parse(process.env[CLIENT]);
  const inline = (() => {
    const body = inlineSubmission(repository);
    body.workspace.source.files.push({ path: "src/huge.rs", bytes: Array(5_000_000).fill(48), executable: false });
    body.workspace.source.files.sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
    return JSON.stringify(body);
  })();
  const manifest = JSON.stringify(
    archiveOf(
      Array.from({ length: 40_000 }, (_, i) => ({ path: `src/m${i}/f.rs`, content: `// ${i}\n` })),
      [],
      { repository },
    ).reservation,
  );
  let keys = 0;
  /** A request of the noisy tenant; its status and text. A source upload's requests carry its id as their key. */
  const call = async (path, body, contentType = "application/json", key = `bench-${process.pid}-${++keys}`) => {
    const res = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": contentType, "idempotency-key": key },
      body,
    });
    return { status: res.status, text: await res.text() };
  };
  /** The streamed archive whose Cargo.toml is 50 MB (a manifest, then comment lines), built on first use. */
  let cargoTomlArchive;
  const next = lineReader(process.stdin);
  process.stdout.write(`ready ${inline.length} ${manifest.length}\n`);
  for (let command = await next(); command !== "exit"; command = await next()) {
    if (command.startsWith("upload-cargo-toml ")) {
      const upload = command.split(" ")[1];
      cargoTomlArchive ??= archiveOf(
        [
          {
            path: "Cargo.toml",
            content: Buffer.concat([
              Buffer.from('[package]\nname = "demo"\nversion = "0.1.0"\n'),
              Buffer.alloc(50 * 1024 * 1024, "# a comment line no real manifest holds fifty megabytes of\n"),
            ]),
          },
          { path: "src/lib.rs", content: "pub fn f() {}\n" },
        ],
        [],
        { repository },
      );
      const q = `repository=${encodeURIComponent(repository)}`;
      const steps = [
        await call("/api/sources", JSON.stringify(cargoTomlArchive.reservation), "application/json", upload),
      ];
      for (const [i, part] of cargoTomlArchive.parts.entries()) {
        steps.push(await call(`/api/sources/${upload}/chunks/${i + 1}?${q}`, part, "application/octet-stream", upload));
      }
      steps.push(await call(`/api/sources/${upload}/complete?${q}`, undefined, "application/json", upload));
      const failed = steps.find((step) => step.status >= 300);
      process.stdout.write(
        `${JSON.stringify({ failed: failed?.text ?? null, manifestSha256: cargoTomlArchive.manifestSha256 })}\n`,
      );
      continue;
    }
    if (command.startsWith("submit-cargo-toml ")) {
      const [, upload, manifestSha256] = command.split(" ");
      const began = performance.now();
      const res = await call("/api/v4/jobs", JSON.stringify(archiveSubmission(upload, manifestSha256, {}, repository)));
      process.stdout.write(
        `${JSON.stringify({ kind: "cargo-toml", status: res.status, ms: performance.now() - began, answer: res.text.slice(0, 200) })}\n`,
      );
      continue;
    }
    if (command.startsWith("quiet ")) {
      const [, job, quietToken] = command.split(" ");
      const latencies = [];
      const pending = [];
      let stopped = false;
      const stop = next().then(() => {
        stopped = true;
      });
      const start = performance.now();
      for (let n = 1; !stopped; n++) {
        pending.push(
          (async () => {
            const began = performance.now();
            const res = await fetch(`${base}/api/jobs/${job}`, { headers: { authorization: `Bearer ${quietToken}` } });
            await res.arrayBuffer();
            latencies.push(performance.now() - began);
          })(),
        );
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + n * 10 - performance.now())));
      }
      await Promise.all(pending);
      await stop;
      process.stdout.write(`${JSON.stringify(latencies)}\n`);
      continue;
    }
    const began = performance.now();
    const res = await fetch(`${base}${command === "inline" ? "/api/v4/jobs" : "/api/sources"}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        "idempotency-key": `bench-${process.pid}-${++keys}`,
      },
      body: command === "inline" ? inline : manifest,
    });
    const text = await res.text();
    process.stdout.write(
      `${JSON.stringify({ kind: command, status: res.status, ms: performance.now() - began, answer: text.slice(0, 200) })}\n`,
    );
  }
  process.exit(0);
}

const RUNS = Number(option("runs", "3"));
const KIND = option("kind", "both");
const { onboardRepository, openStorage } = await import("@kiln/storage");
const { personWithToken, testApp } = await import(dist("server", "src/testing/harness.js"));
const { inlineSubmission } = await import(dist("server", "src/testing/job-fixtures.js"));

const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-large-"));
const storage = await openStorage({ dataDir });
const repository = "acme/widget";
const quiet = await personWithToken(storage, { role: "owner", now: new Date() });
const noisy = await personWithToken(storage, { role: "owner", now: new Date() });
for (const p of [quiet, noisy]) {
  await onboardRepository(storage, { tenantId: p.tenant, name: repository, onboardedBy: "bench" }, new Date());
}
const { systemClock } = await import("@kiln/contract");
const workers = option("workers", undefined);
const harness = await testApp(storage, {
  clock: systemClock,
  checkResponses: false,
  ...(workers === undefined ? {} : { bodyWorkers: Number(workers) }),
});
log(`body workers: ${workers ?? "default"}`);
const base = await harness.app.listen({ host: "127.0.0.1", port: 0 });
const quietJob = await (async () => {
  const res = await fetch(`${base}/api/v4/jobs`, {
    method: "POST",
    headers: { authorization: `Bearer ${quiet.token}`, "content-type": "application/json", "idempotency-key": "q1" },
    body: JSON.stringify(inlineSubmission(repository)),
  });
  if (res.status !== 200) throw new Error(`quiet submit: ${res.status} ${await res.text()}`);
  return String(await res.json());
})();

/** A client process (this file, as CLIENT) and a reader of its answer lines. */
async function client() {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { ...process.env, [CLIENT]: JSON.stringify({ base, token: noisy.token, repository }) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const next = lineReader(child.stdout);
  log(`client ${await next()}`);
  return { child, next, say: (line) => child.stdin.write(`${line}\n`) };
}
const noisyClient = await client();
const quietClient = await client();

/** Runs `during` while a 1 ms timer watches this loop and the quiet client sends jobs.get every 10 ms. */
async function watched(during) {
  let worstStall = 0;
  let stalled = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    const late = now - last - 1;
    if (late > worstStall) worstStall = late;
    if (late > 20) stalled += late;
    last = now;
  }, 1);
  quietClient.say(`quiet ${quietJob} ${quiet.token}`);
  const result = await during();
  quietClient.say("stop");
  const latencies = JSON.parse(await quietClient.next()).sort((a, b) => a - b);
  clearInterval(ticker);
  return {
    result,
    worstStall,
    stalled,
    quietP50: latencies[Math.floor(latencies.length / 2)] ?? Number.NaN,
    quietWorst: latencies.at(-1) ?? Number.NaN,
    quietCount: latencies.length,
  };
}

const send = async (kind) => {
  noisyClient.say(kind);
  return JSON.parse(await noisyClient.next());
};
const fmt = (ms) => `${ms.toFixed(0)} ms`;
log(
  `load average ${loadavg()
    .map((n) => n.toFixed(1))
    .join(" ")}`,
);
const baseline = await watched(() => new Promise((resolve) => setTimeout(resolve, 2000)));
log(
  `quiet alone (2 s): longest stall ${fmt(baseline.worstStall)}; jobs.get p50 ${baseline.quietP50.toFixed(1)} ms, worst ${fmt(baseline.quietWorst)} (${baseline.quietCount})`,
);
const kinds = KIND === "both" ? ["inline", "manifest"] : [KIND];
const NAMES = {
  inline: "jobs.submit 15 MB inline",
  manifest: "sources.reserve 40,000 files",
  "cargo-toml": "jobs.submit, a 50 MB Cargo.toml",
};
for (let run = 1; run <= RUNS; run++) {
  for (const kind of kinds) {
    let request = kind;
    if (kind === "cargo-toml") {
      const upload = `cargo-toml-${run}`;
      const uploaded = await send(`upload-cargo-toml ${upload}`);
      if (uploaded.failed !== null) throw new Error(`uploading the archive: ${uploaded.failed}`);
      request = `submit-cargo-toml ${upload} ${uploaded.manifestSha256}`;
    }
    // A refused submission answers in milliseconds: the quiet tenant is watched for 3 s from its
    // start at least, so that its figures are of as many requests as the baseline's.
    const seen = await watched(async () =>
      kind === "cargo-toml"
        ? (await Promise.all([send(request), new Promise((resolve) => setTimeout(resolve, 3000))]))[0]
        : send(request),
    );
    const { result } = seen;
    if (result.status !== 200) log(`  ${kind} answered ${result.status}: ${result.answer}`);
    log(
      `${NAMES[kind]} (run ${run}): ${fmt(result.ms)}; ` +
        `longest loop stall ${fmt(seen.worstStall)} (stalls over 20 ms: ${fmt(seen.stalled)}); ` +
        `quiet jobs.get p50 ${seen.quietP50.toFixed(1)} ms (× ${(seen.quietP50 / baseline.quietP50).toFixed(1)}), ` +
        `worst ${fmt(seen.quietWorst)} (× ${(seen.quietWorst / baseline.quietWorst).toFixed(1)})`,
    );
  }
}
log(
  `load average ${loadavg()
    .map((n) => n.toFixed(1))
    .join(" ")}`,
);
noisyClient.say("exit");
quietClient.say("exit");
await harness.app.close();
await storage.close();
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
