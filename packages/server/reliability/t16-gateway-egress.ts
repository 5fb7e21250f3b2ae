/**
 * T16 gateway egress (issue 33): the probe's reproductions against the dependency gateway, as
 * real jobs through a real `kiln-server serve` process (SQLite, its embedded host, the sandbox
 * executor, the gateway's worker per attempt), with real upstreams on loopback. Every workspace
 * names something the gateway must not fetch for it — the host's own git repository, `fd::` and
 * `ext::` transports, a registry or git server on loopback, link-local or kiln's own port, a name
 * resolving to loopback, a redirect or `dl` into loopback, a gzip bomb, a 1.5 GiB crate — or
 * tries to walk the tenant's registry credential to another origin.
 *
 * Broken: a probe job that does not fail with cause `dependencies` and the rule in its detail;
 * a detail carrying anything an upstream sent; any connection reaching a listener the probes
 * name that the policy refuses; the host's repository mirrored; `ext::`'s command run; the
 * registry credential presented anywhere but its registered origin; kiln-server's resident
 * memory growing by 64 MiB or more while the gateway meets the bomb and the 1.5 GiB download.
 */

import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import {
  commitRepository,
  makeTestTls,
  type RecordingServer,
  sparseIndexPath,
  startHostileRegistry,
  startRecordingServer,
} from "@kiln/host/testing";
import { onboardRepository, openStorage } from "@kiln/storage";
import { crate } from "../src/testing/e2e-jobs.js";
import { personWithToken } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import {
  ResidentMemorySampler,
  type ServerProcess,
  startServerProcess,
  stopServerProcess,
} from "../test/server-process.js";
import { REPOSITORY } from "./fixtures.js";
import { count, runTrial } from "./trial.js";

/** What every hostile upstream sends: no job's record may carry it. */
const MARKER = `T16-UPSTREAM-${randomBytes(4).toString("hex")}`;
const CHECKSUM = "5a".repeat(32);
const RSS_BOUND_BYTES = 64 * 2 ** 20;

/** A free port on loopback (for KILN_LISTEN: the gateway must know kiln's own port before it starts). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

interface Probe {
  readonly name: string;
  readonly files: Record<string, string>;
  /** What the failure's detail must say (the rule), besides cause `dependencies`. */
  readonly rule: RegExp;
}

/** A crate depending on `victim` locked to `source`, with `.cargo/config.toml` naming it when it is a registry. */
function lockedTo(source: string, config: string | null): Record<string, string> {
  return {
    "Cargo.toml": `[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nvictim = { version = "1"${config === null ? "" : ', registry = "evil"'} }\n`,
    "Cargo.lock": `version = 3\n\n[[package]]\nname = "probe"\nversion = "0.1.0"\ndependencies = ["victim"]\n\n[[package]]\nname = "victim"\nversion = "1.0.0"\nsource = "${source}"\nchecksum = "${CHECKSUM}"\n`,
    ...(config === null ? {} : { ".cargo/config.toml": config }),
    "src/lib.rs": "",
  };
}
const tenantRegistry = (index: string) => lockedTo(index, `[registries.evil]\nindex = "${index}"\n`);
const gitDependency = (url: string) => ({
  "Cargo.toml": `[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nd = { git = ${JSON.stringify(url)} }\n`,
  "src/lib.rs": "",
});

runTrial("T16", "gateway egress", async () => {
  const broken: string[] = [];
  const scratch = mkdtempSync(join(tmpdir(), "kiln-t16-"));
  const dataDir = join(scratch, "data");
  const tls = await makeTestTls();
  const sendMarker = (_req: unknown, res: import("node:http").ServerResponse) => res.writeHead(200).end(MARKER);
  // Listeners no probe may reach: plain, and one that would be a real https upstream.
  const forbidden = await startRecordingServer(sendMarker);
  const forbiddenTls = await startRecordingServer(sendMarker, { tls });
  const victim = { name: "victim", version: "1.0.0", checksum: CHECKSUM };
  // Tenant registries the operator allows (each by its port), each hostile in its own way.
  const bomb = await startHostileRegistry({ crate: victim, download: { kind: "gzip-bomb" } });
  const huge = await startHostileRegistry({
    crate: victim,
    download: { kind: "huge", bytes: 1.5 * 2 ** 30, announced: false },
  });
  const redirecting = await startHostileRegistry({
    crate: victim,
    download: { kind: "redirect", location: `https://127.0.0.1:${forbidden.port}/?${MARKER}` },
  });
  const dlToLoopback = await startHostileRegistry({
    crate: victim,
    download: { kind: "never" },
    dl: () => `https://localhost:${forbidden.port}/api`,
  });
  // The tenant's private registry (https, the credential registered for its origin) and another origin.
  const secret = `Bearer t16-${randomBytes(12).toString("hex")}`;
  const elsewhere = await startRecordingServer(
    (req, res, origin) => {
      if (new URL(req.url ?? "/", origin).pathname === "/config.json") {
        res.writeHead(200).end(JSON.stringify({ dl: `${origin}/dl` }));
      } else res.writeHead(404).end(MARKER);
    },
    { tls },
  );
  const privateRegistry = await startRecordingServer(
    (req, res, origin) => {
      const path = new URL(req.url ?? "/", origin).pathname;
      if (req.headers.authorization !== secret) return void res.writeHead(401).end(MARKER);
      if (path.endsWith(`/index/${sparseIndexPath("victim")}`)) {
        return void res
          .writeHead(200)
          .end(`${JSON.stringify({ name: "victim", vers: "1.0.0", deps: [], cksum: CHECKSUM })}\n`);
      }
      // /dl-elsewhere/: a `dl` on another origin; /redirected/: config.json redirected to another origin.
      if (path === "/dl-elsewhere/index/config.json")
        return void res.writeHead(200).end(JSON.stringify({ dl: `${elsewhere.origin}/dl` }));
      if (path === "/redirected/index/config.json") {
        return void res.writeHead(302, { location: `${elsewhere.origin}/config.json` }).end();
      }
      res.writeHead(404).end(MARKER);
    },
    { tls },
  );
  const registryHost = `127.0.0.1:${privateRegistry.port}`;

  // The host's own repository, holding a secret: the probe's first finding.
  const hostRepo = join(scratch, "host-repo");
  const head = commitRepository(hostRepo, { "secret.txt": `${MARKER}\n` });
  const extRan = join(scratch, "ext-ran");

  const kilnPort = await freePort();
  const storage = await openStorage({ dataDir });
  const owner = await personWithToken(storage, { role: "owner", now: new Date() });
  await onboardRepository(storage, { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "t16" }, new Date());
  await storage.close();

  let server: ServerProcess | undefined;
  const upstreams: RecordingServer[] = [
    forbidden,
    forbiddenTls,
    bomb,
    huge,
    redirecting,
    dlToLoopback,
    elsewhere,
    privateRegistry,
  ];
  let probes = 0;
  let refused = 0;
  let rssGrowth = 0;
  try {
    server = await startServerProcess({
      KILN_DATA_DIR: dataDir,
      KILN_LISTEN: `127.0.0.1:${kilnPort}`,
      KILN_CRATES_IO_INDEX: "sparse+http://127.0.0.1:9/index/",
      // What an operator allows: exactly these upstreams' ports, and kiln's own (still refused).
      KILN_GATEWAY_ALLOW: [bomb, huge, redirecting, dlToLoopback, elsewhere, privateRegistry]
        .map((u) => `127.0.0.1:${u.port}`)
        .concat(`127.0.0.1:${kilnPort}`)
        .join(","),
      KILN_GATEWAY_CA_FILE: tls.caFile,
    });
    const base = server.url;
    const pid = server.child.pid ?? 0;
    let keys = 0;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${owner.token}`,
          ...(body === undefined ? {} : { "content-type": "application/json", "idempotency-key": `t16-${++keys}` }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text) as unknown;
    };
    const submit = (files: Record<string, string>) =>
      call("POST", "/api/v4/jobs", inlineSubmission(REPOSITORY, "build", crate("probe", files))) as Promise<string>;
    type Job = { status: string; failure: { cause: string; phase: string; detail: string } | null };
    const settle = async (id: string): Promise<Job> => {
      for (;;) {
        const job = (await call("GET", `/api/jobs/${id}`)) as Job;
        if (TERMINAL_JOB_STATUSES.has(job.status)) return job;
        await sleep(200);
      }
    };
    await call("POST", "/api/tenant/registry-credentials", {
      registry: registryHost,
      authorization: secret,
      confirm: registryHost,
    });

    const gitProbes: Probe[] = [
      {
        name: "git file:// of the host's repository",
        files: gitDependency(`file://${hostRepo}`),
        rule: /https only \(file is never used/,
      },
      {
        name: "git file:// of the host's repository, locked",
        files: {
          ...gitDependency(`file://${hostRepo}`),
          "Cargo.lock": `version = 3\n\n[[package]]\nname = "d"\nversion = "0.1.0"\nsource = "git+file://${hostRepo}#${head}"\n\n[[package]]\nname = "probe"\nversion = "0.1.0"\ndependencies = ["d"]\n`,
        },
        rule: /https only \(file is never used/,
      },
      {
        name: "git bare path of the host's repository",
        files: gitDependency(hostRepo),
        rule: /must be an https:\/\/ URL \(never a local path/,
      },
      { name: "git fd::17", files: gitDependency("fd::17"), rule: /https only \(fd is never used/ },
      {
        name: "git ext::",
        files: gitDependency(`ext::sh -c touch% ${extRan}`),
        rule: /https only \(ext is never used/,
      },
      {
        name: "git https on loopback",
        files: gitDependency(`https://127.0.0.1:${forbiddenTls.port}/repo.git`),
        rule: /127\.0\.0\.1 is a loopback address/,
      },
      {
        name: "git https to a name resolving to loopback",
        files: gitDependency(`https://localhost:${forbiddenTls.port}/repo.git`),
        rule: /localhost resolves to a loopback address/,
      },
    ];
    const registryProbes: Probe[] = [
      {
        name: "registry http on loopback",
        files: tenantRegistry(`sparse+${forbidden.origin}/index/`),
        rule: /registries are reached over https only/,
      },
      {
        name: "registry https on loopback",
        files: tenantRegistry(`sparse+https://127.0.0.1:${forbidden.port}/index/`),
        rule: /127\.0\.0\.1 is a loopback address/,
      },
      {
        name: "registry on link-local (metadata service)",
        files: tenantRegistry("sparse+https://169.254.169.254/latest/"),
        rule: /169\.254\.169\.254 is a link-local address/,
      },
      {
        name: "registry at a name resolving to loopback",
        files: tenantRegistry(`sparse+https://localhost:${forbidden.port}/index/`),
        rule: /localhost resolves to a loopback address/,
      },
      {
        name: "registry at kiln's own port (allowed by address)",
        files: tenantRegistry(`sparse+http://127.0.0.1:${kilnPort}/index/`),
        rule: new RegExp(`127\\.0\\.0\\.1:${kilnPort} is one of kiln's own listeners`),
      },
      {
        name: "a redirect into loopback",
        files: tenantRegistry(redirecting.indexUrl),
        rule: /a redirect to https:\/\/127\.0\.0\.1:\d+ is refused: 127\.0\.0\.1 is a loopback address/,
      },
      {
        name: "a dl into loopback",
        files: tenantRegistry(dlToLoopback.indexUrl),
        rule: /localhost resolves to a loopback address/,
      },
    ];
    const credentialProbes: Probe[] = [
      {
        name: "credential: a dl on another origin",
        files: tenantRegistry(`sparse+https://${registryHost}/dl-elsewhere/index/`),
        rule: /unknown_crate/,
      },
      {
        name: "credential: config.json through a cross-origin redirect",
        files: tenantRegistry(`sparse+https://${registryHost}/redirected/index/`),
        rule: /unknown_crate/,
      },
      {
        name: "credential: plain http",
        files: tenantRegistry(`sparse+http://${registryHost}/dl-elsewhere/index/`),
        rule: /credential for 127\.0\.0\.1:\d+ is presented over https only/,
      },
    ];
    const mirrors = () =>
      existsSync(join(dataDir, "crates", "git")) ? readdirSync(join(dataDir, "crates", "git")).length : 0;
    const run = async (probe: Probe) => {
      probes++;
      const job = await settle(await submit(probe.files));
      const record = JSON.stringify(job);
      if (job.status !== "failed" || job.failure?.cause !== "dependencies" || job.failure.phase !== "fetch") {
        broken.push(`${probe.name}: ${job.status} ${JSON.stringify(job.failure)}`);
      } else if (!probe.rule.test(job.failure.detail)) {
        broken.push(`${probe.name}: the detail does not name the rule: ${job.failure.detail}`);
      } else refused++;
      if (record.includes(MARKER)) broken.push(`${probe.name}: the job's record carries what an upstream sent`);
      if (record.includes(secret)) broken.push(`${probe.name}: the job's record carries the registry credential`);
    };
    for (const probe of [...gitProbes, ...registryProbes, ...credentialProbes]) await run(probe);
    if (mirrors() !== 0) broken.push(`${mirrors()} git mirrors were made; no probe's URL may be mirrored`);
    if (existsSync(extRan)) broken.push("ext::'s command ran on the host");
    for (const [what, listener] of [
      ["the forbidden loopback listener", forbidden],
      ["the forbidden https listener", forbiddenTls],
    ] as const) {
      if (listener.connections() !== 0) broken.push(`${what} was reached ${listener.connections()} times`);
    }
    const leaked = elsewhere.requests.filter((r) => r.headers.authorization !== undefined).length;
    if (elsewhere.requests.length === 0)
      broken.push("the other origin was never asked: the credential probes proved nothing");
    if (leaked > 0) broken.push(`the registry credential reached another origin ${leaked} times`);
    if (!privateRegistry.requests.some((r) => r.headers.authorization === secret)) {
      broken.push("the private registry never got its credential: the credential probes proved nothing");
    }

    // The gzip bomb and the 1.5 GiB download, with kiln-server's resident memory sampled throughout.
    const memory = new ResidentMemorySampler(pid);
    const sizeProbes: Probe[] = [
      {
        name: "a gzip bomb",
        files: tenantRegistry(bomb.indexUrl),
        rule: /gzip-encoded body .* never decodes a body \(it takes at most 64 MiB, the bound on one crate/,
      },
      {
        name: "a 1.5 GiB download",
        files: tenantRegistry(huge.indexUrl),
        rule: /is larger than 64 MiB, the bound on one crate/,
      },
    ];
    for (const probe of sizeProbes) await run(probe);
    const { before, peak } = await memory.stop();
    rssGrowth = peak - before;
    if (rssGrowth >= RSS_BOUND_BYTES) {
      broken.push(`kiln-server's resident memory grew by ${(rssGrowth / 2 ** 20).toFixed(1)} MiB (bound 64 MiB)`);
    }
  } finally {
    await stopServerProcess(server);
    for (const upstream of upstreams) await upstream.close();
    await tls.remove();
    rmSync(scratch, { recursive: true, force: true });
  }
  return {
    figure: `${count(probes)} probes as jobs through kiln-server: ${count(refused)} failed with cause dependencies naming the rule; the 2 listeners no probe may reach reached ${broken.some((b) => b.includes("was reached")) ? "(see broken)" : "0 times"}; the registry credential presented to 0 other origins; kiln-server's RSS +${(rssGrowth / 2 ** 20).toFixed(1)} MiB over the gzip bomb and the 1.5 GiB download (bound 64 MiB); ${broken.length} broken promises`,
    broken,
  };
});
