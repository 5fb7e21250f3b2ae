/**
 * T3 cache poisoning: a tenant cannot get its bytes into another tenant's lineage, source parts
 * or crate cache.
 *
 * Source parts (both engines, through the API): tenant B, knowing the digest of a file tenant A
 * is about to upload, reserves an upload declaring that digest and sends other bytes under it
 * (same length, other length); then, after A uploaded, reserves the same manifest again and asks
 * sources.chunk.check for A's part, and sends its own bytes under A's digest. Broken: any of B's
 * bytes accepted under a digest they do not hash to, a blob in the store whose bytes do not hash
 * to its name, A's upload finding B's part held (or B finding A's), A's upload not verified or
 * its stored part other than A's bytes.
 *
 * Lineages: A's and B's jobs with the same repository name and job class, placed through the host
 * protocol (both engines), must name their own tenant and so key different lineages; on a host's
 * lineage store, what A's attempt saved in its target dir must not reach B's checkout of the same
 * repository and class (and must reach A's next, or the probe proves nothing); identities that a
 * naive concatenation would confuse must key different lineages.
 *
 * Crate cache (the host's, content-addressed by checksum): bytes that do not hash to the locked
 * checksum are never stored; a crate stored in A's private-registry scope is found in neither B's
 * scope nor the public one; A's fetch of a checksum that fails (A's lock names another crate under
 * B's crate's checksum) must not fail B's concurrent fetch of its real crate, nor show B anything
 * of A's; through the dependency gateway with a real sparse registry, a private crate A fetched
 * with its credential is not handed to B's job locking the same registry and checksum without one.
 */
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ManualClock } from "@kiln/contract/testing";
import {
  CrateCache,
  type CrateFetch,
  DependencyGateway,
  LineageStore,
  lineageKey,
  parseGatewayAllow,
} from "@kiln/host";
import { startSparseRegistry } from "@kiln/host/testing";
import { LocalBlobStore, onboardRepository } from "@kiln/storage";
import { bearer, hostProtocolOf, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";
import { archiveOf, Sources, sha256 } from "../test/source-archives.js";
import { HOST_ID, REPOSITORY } from "./fixtures.js";
import { count, runTrial, trialDialects } from "./trial.js";

interface Tally {
  probes: number;
  /** Bytes some tenant sent under a digest they do not hash to. */
  poisonSent: number;
  poisonAccepted: number;
  foreignPartsSeen: number;
  badBlobs: number;
  blobs: number;
  broken: string[];
}

/** Whether a reservation's missing_parts ranges include part 1. */
const missesPartOne = (missing: unknown) =>
  Array.isArray(missing) && missing.some((r: { first: number; last: number }) => r.first <= 1 && r.last >= 1);

const isRefusal = (status: number, body: string, code: string) =>
  status >= 400 && (JSON.parse(body) as { code?: string }).code === code;

async function sourceParts(t: TestApp, dialect: string, tally: Tally): Promise<void> {
  const broken = (what: string) => tally.broken.push(`${dialect} source parts: ${what}`);
  const a = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
  const b = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
  for (const p of [a, b]) {
    await onboardRepository(t.storage, { tenantId: p.tenant, name: REPOSITORY, onboardedBy: "t3" }, t.clock.now());
  }
  const sourcesA = new Sources(t.app, a.token, REPOSITORY);
  const sourcesB = new Sources(t.app, b.token, REPOSITORY);
  const secret = `pub fn tenant_a_secret() -> u64 { ${a.tenant.length * 7919} }\n`;
  const archive = archiveOf([
    { path: "Cargo.toml", content: '[package]\nname = "a"\nversion = "0.1.0"\n' },
    { path: "src/lib.rs", content: secret },
  ]);
  const aPart = archive.parts[0];
  if (aPart === undefined || archive.parts.length !== 1) throw new Error("the archive should be one part");
  const digest = sha256(aPart);
  const poison = Buffer.from(aPart.toString("latin1").replace(/secret/g, "poison"), "latin1");
  const poisons = [poison, Buffer.concat([poison, Buffer.from("\n// longer")]), Buffer.alloc(aPart.length)];

  // ---- before A uploads: B reserves A's manifest and sends other bytes under A's digest.
  const early = await sourcesB.reserve(archive.reservation, "t3-b-early");
  if (early.status !== 200) throw new Error(`B's reservation: ${early.body}`);
  for (const bytes of poisons) {
    tally.probes += 1;
    tally.poisonSent += 1;
    const put = await sourcesB.put("t3-b-early", 1, bytes);
    if (put.status < 300) {
      tally.poisonAccepted += 1;
      broken(`B's ${bytes.length} bytes under A's digest were accepted (${put.status})`);
    } else if (!isRefusal(put.status, put.body, "invalid_request")) {
      broken(`B's bytes under A's digest answered ${put.status} ${put.body.slice(0, 160)}`);
    }
  }
  tally.probes += 1;
  if (await t.deps.blobs.has(digest)) broken("the store holds A's digest before A sent it");

  // ---- A uploads: nothing of B's is found held, and the upload verifies with A's bytes.
  const reservedA = await sourcesA.reserve(archive.reservation, "t3-a");
  tally.probes += 2;
  if (reservedA.status !== 200 || !missesPartOne(reservedA.json().missing_parts)) {
    tally.foreignPartsSeen += 1;
    broken(`A's reservation found part 1 held: ${reservedA.body}`);
  }
  const checkA = await sourcesA.check("t3-a", 1, digest);
  if (checkA.status !== 200 || checkA.json().present !== false) {
    tally.foreignPartsSeen += 1;
    broken(`A's check of its part before sending it answered ${checkA.status} ${checkA.body}`);
  }
  const putA = await sourcesA.put("t3-a", 1, aPart);
  const completeA = await sourcesA.complete("t3-a");
  tally.probes += 1;
  if (putA.status !== 204 || completeA.status !== 200 || completeA.json().state !== "verified") {
    broken(`A's upload did not verify: put ${putA.status}, complete ${completeA.status} ${completeA.body}`);
  }

  // ---- after A uploaded: B's reservation and check of A's digest find nothing of A's, and
  // B's bytes under it are still refused; B sending the same bytes itself is no poisoning.
  const late = await sourcesB.reserve(archive.reservation, "t3-b-late");
  tally.probes += 2;
  if (late.status !== 200) throw new Error(`B's second reservation: ${late.body}`);
  const lateMissing = late.json().missing_parts as unknown;
  if (!missesPartOne(lateMissing)) {
    tally.foreignPartsSeen += 1;
    broken(`B's reservation of A's manifest found A's part held: ${JSON.stringify(lateMissing)}`);
  }
  const checkB = await sourcesB.check("t3-b-late", 1, digest);
  if (checkB.status !== 200 || checkB.json().present !== false) {
    tally.foreignPartsSeen += 1;
    broken(`B's check of A's digest answered ${checkB.status} ${checkB.body}`);
  }
  for (const bytes of poisons) {
    tally.probes += 1;
    tally.poisonSent += 1;
    const put = await sourcesB.put("t3-b-late", 1, bytes);
    if (put.status < 300) {
      tally.poisonAccepted += 1;
      broken(`after A's upload, B's ${bytes.length} bytes under A's digest were accepted`);
    }
  }
  const statusB = await sourcesB.status("t3-b-late");
  tally.probes += 1;
  if (statusB.json().parts_received !== 0) broken(`B's upload holds a part: ${statusB.body}`);

  // ---- every blob in the store is the bytes its name is the digest of; A's part is A's bytes.
  if (!(t.deps.blobs instanceof LocalBlobStore)) throw new Error("the trial inspects a local blob store");
  const root = t.deps.blobs.root;
  for (const shard of await readdir(root).catch(() => [] as string[])) {
    for (const name of await readdir(join(root, shard)).catch(() => [] as string[])) {
      if (!/^[0-9a-f]{64}$/.test(name)) continue;
      tally.blobs += 1;
      tally.probes += 1;
      if (sha256(await readFile(join(root, shard, name))) !== name) {
        tally.badBlobs += 1;
        broken(`blob ${name} holds bytes of another digest`);
      }
    }
  }
  tally.probes += 1;
  if (!(await t.deps.blobs.get(digest)).equals(aPart)) broken("A's stored part is not A's bytes");
}

async function placements(t: TestApp, dialect: string, tally: Tally): Promise<void> {
  const broken = (what: string) => tally.broken.push(`${dialect} lineages: ${what}`);
  const protocol = hostProtocolOf(t.deps);
  await protocol.enroll({ id: HOST_ID, vcpus: 16, memoryBytes: 2 ** 34, isolation: "sandbox" });
  const keys = new Map<string, string>();
  for (const role of ["a", "b"]) {
    const p = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
    await onboardRepository(t.storage, { tenantId: p.tenant, name: REPOSITORY, onboardedBy: "t3" }, t.clock.now());
    const res = await t.app.inject({
      method: "POST",
      url: "/api/v4/jobs",
      headers: { ...bearer(p.token), "idempotency-key": `t3-${role}`, "content-type": "application/json" },
      payload: JSON.stringify(inlineSubmission(REPOSITORY, "build")),
    });
    if (res.statusCode !== 200) throw new Error(`submit: ${res.body}`);
    const placement = await protocol.claim(HOST_ID, 16);
    if (placement === null) throw new Error("nothing placed");
    tally.probes += 1;
    if (placement.tenant !== p.tenant || placement.repository !== REPOSITORY) {
      broken(`${role}'s job was placed as ${placement.tenant}'s ${placement.repository}`);
    }
    keys.set(
      role,
      lineageKey({ tenant: placement.tenant, repository: placement.repository, jobClass: placement.jobClass }),
    );
  }
  tally.probes += 1;
  if (keys.get("a") === keys.get("b")) broken("two tenants' jobs of one repository name and class share a lineage");
}

async function lineageStore(tally: Tally): Promise<void> {
  const broken = (what: string) => tally.broken.push(`lineage store: ${what}`);
  const root = await mkdtemp(join(tmpdir(), "kiln-t3-lineages-"));
  try {
    const store = new LineageStore(join(root, "lineages"));
    const identity = (tenant: string) => ({ tenant, repository: REPOSITORY, jobClass: "build/dev/stable" });
    const at = new Date("2026-11-25T10:00:00.000Z");
    const first = await store.checkout(identity("tenant-a"), join(root, "a1"), "a1");
    await mkdir(first.targetDir, { recursive: true });
    await writeFile(join(first.targetDir, "poison"), "A's bytes");
    const saved = await store.checkIn(first, { bytes: 9, record: null, at });
    if (!saved.saved) throw new Error(`A's save was not kept: ${saved.detail}`);
    const b = await store.checkout(identity("tenant-b"), join(root, "b1"), "b1");
    tally.probes += 1;
    const bSees = await readFile(join(b.targetDir, "poison"), "utf8").catch(() => null);
    if (b.outcome !== "cold" || bSees !== null) broken(`B's checkout was ${b.outcome} and found ${String(bSees)}`);
    await store.discard(b, "probe", at);
    const again = await store.checkout(identity("tenant-a"), join(root, "a2"), "a2");
    tally.probes += 1;
    if (again.outcome !== "warm" || (await readFile(join(again.targetDir, "poison"), "utf8")) !== "A's bytes") {
      broken(`A's own next checkout was ${again.outcome}: the probe cannot tell isolation from loss`);
    }
    // Identities a separator-joined key would confuse.
    const pairs = [
      [
        { tenant: "a", repository: "b/c", jobClass: "x" },
        { tenant: "a/b", repository: "c", jobClass: "x" },
      ],
      [
        { tenant: "a", repository: 'r","x', jobClass: "y" },
        { tenant: "a", repository: "r", jobClass: 'x","y' },
      ],
      [
        { tenant: "a\u0000b", repository: "r", jobClass: "c" },
        { tenant: "a", repository: "b\u0000r", jobClass: "c" },
      ],
    ] as const;
    for (const [x, y] of pairs) {
      tally.probes += 1;
      if (lineageKey(x) === lineageKey(y)) broken(`${JSON.stringify(x)} and ${JSON.stringify(y)} share a key`);
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** A crate cache whose lookups can be observed, to stage a race without timing. */
class ObservedCache extends CrateCache {
  onLookup: (() => void) | undefined;
  override async lookup(scope: string, sha: string) {
    const found = await super.lookup(scope, sha);
    this.onLookup?.();
    return found;
  }
}

/** A crate fetch as the registry client makes one: the bytes streamed into the cache's file, their digest and size. */
const serving =
  (bytes: Uint8Array, indexLine: string): CrateFetch =>
  async (file) => {
    await writeFile(file, bytes);
    return { sha256: createHash("sha256").update(bytes).digest("hex"), size: bytes.length, indexLine };
  };

async function crateCache(tally: Tally): Promise<void> {
  const broken = (what: string) => tally.broken.push(`crate cache: ${what}`);
  const root = await mkdtemp(join(tmpdir(), "kiln-t3-crates-"));
  const digestOf = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
  try {
    const cache = new ObservedCache(join(root, "cache"), 2 ** 30);
    // Bytes that do not hash to the locked checksum are refused and never stored.
    const real = Buffer.from("the real crate bytes of B's serde_json");
    const checksum = digestOf(real);
    tally.probes += 1;
    tally.poisonSent += 1;
    const refused = await cache
      .obtain("public", checksum, "serde_json 1.0.0 (A's lock)", serving(Buffer.from("A's bytes"), "{}"))
      .then(
        () => false,
        () => true,
      );
    if (!refused || (await cache.lookup("public", checksum)) !== null) {
      tally.poisonAccepted += 1;
      broken("bytes not hashing to the locked checksum were stored");
    }

    // A private scope's crate is in no other scope.
    const privateBytes = Buffer.from("A's private crate");
    const privateSum = digestOf(privateBytes);
    await cache.obtain("tenant-aaaa/r-1", privateSum, "private 0.1.0", serving(privateBytes, '{"name":"private"}'));
    for (const scope of ["tenant-bbbb/r-1", "public"]) {
      tally.probes += 1;
      if ((await cache.lookup(scope, privateSum)) !== null) {
        tally.foreignPartsSeen += 1;
        broken(`A's private crate is found in scope ${scope}`);
      }
    }

    // A's failing fetch under B's checksum, in flight when B asks for its real crate.
    let aStarted: () => void = () => {};
    const aFetching = new Promise<void>((resolve) => {
      aStarted = resolve;
    });
    let bLooked: () => void = () => {};
    const bLookedUp = new Promise<void>((resolve) => {
      bLooked = resolve;
    });
    const aWhat = "itoa 1.0.9 from tenant A's lock (a-private-dependency-name)";
    const aResult = cache
      .obtain("public", checksum, aWhat, async (file) => {
        aStarted();
        await bLookedUp;
        // Every continuation of B's lookup has run before A's answer comes back.
        await new Promise((resolve) => setImmediate(resolve));
        return serving(Buffer.from("itoa's bytes, not serde_json's"), '{"name":"itoa"}')(file);
      })
      .catch(() => undefined);
    await aFetching;
    cache.onLookup = () => {
      cache.onLookup = undefined;
      bLooked();
    };
    tally.probes += 1;
    const bResult = await cache
      .obtain("public", checksum, "serde_json 1.0.0 from crates.io", serving(real, '{"name":"serde_json"}'))
      .then(
        async (crate) => ({ ok: true as const, bytes: await readFile(crate.path), line: crate.indexLine }),
        (error: unknown) => ({ ok: false as const, message: String(error) }),
      );
    await aResult;
    if (!bResult.ok) {
      broken(`A's failing fetch failed B's fetch of its real crate: ${bResult.message}`);
      if (bResult.message.includes("a-private-dependency-name")) broken("B's failure named A's dependency");
    } else if (!bResult.bytes.equals(real) || !bResult.line.includes("serde_json")) {
      tally.poisonAccepted += 1;
      broken("B got other bytes or another index line than its crate's");
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Through the dependency gateway: a private crate A fetched with its credential is not B's without one. */
async function gatewayScopes(tally: Tally): Promise<void> {
  const broken = (what: string) => tally.broken.push(`dependency gateway: ${what}`);
  const authorization = "Bearer t3-private-registry-secret";
  const registry = await startSparseRegistry({ crates: ["itoa"], authorization });
  const root = await mkdtemp(join(tmpdir(), "kiln-t3-gateway-"));
  try {
    const itoa = registry.crates.get("itoa")?.[0];
    if (itoa === undefined) throw new Error("the registry serves no itoa");
    const gateway = new DependencyGateway({
      cacheRoot: join(root, "cache"),
      cacheMaxBytes: 2 ** 30,
      cratesIoIndex: "sparse+http://127.0.0.1:9/index/",
      clock: new ManualClock(new Date("2026-11-25T10:00:00Z")),
      retry: { attempts: 1, firstDelayMs: 1 },
      // The test registry is a tenant's private registry on loopback: allowed as an operator would.
      egress: {
        allow: parseGatewayAllow(new URL(registry.origin).host),
        ownListeners: [],
        gitSsh: false,
        loopbackHttpCredentials: true,
      },
    });
    const host = new URL(registry.origin).host;
    const lock = `version = 3\n\n[[package]]\nname = "itoa"\nversion = "${itoa.version}"\nsource = "${registry.indexUrl}"\nchecksum = "${itoa.checksum}"\n`;
    const provide = async (tenant: string, withCredential: boolean) => {
      const workspace = join(root, tenant, "src");
      await mkdir(join(workspace, ".cargo"), { recursive: true });
      await writeFile(join(workspace, "Cargo.toml"), `[package]\nname = "w"\nversion = "0.1.0"\n`);
      await writeFile(
        join(workspace, ".cargo", "config.toml"),
        `[registries.private]\nindex = "${registry.indexUrl}"\n`,
      );
      const depsDir = join(root, tenant, "deps");
      await mkdir(depsDir, { recursive: true });
      return gateway
        .provide({
          tenant,
          attemptId: `${tenant}-a1`,
          workspaceDir: workspace,
          lockfile: lock,
          manifestPaths: ["Cargo.toml"],
          depsDir,
          sandboxDepsDir: depsDir,
          credentials: async () => (withCredential ? [{ registry: host, version: 1, authorization }] : []),
          generateLockfile: async () => {
            throw new Error("the lock is given");
          },
          log: () => {},
          signal: new AbortController().signal,
        })
        .then(
          (provided) => ({ ok: true as const, provided, depsDir }),
          (error: unknown) => ({ ok: false as const, error: String(error), depsDir }),
        );
    };
    const a = await provide("tenant-a", true);
    tally.probes += 1;
    if (!a.ok) throw new Error(`A could not fetch its own private crate: ${a.error}`);
    const b = await provide("tenant-b", false);
    tally.probes += 1;
    const found: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
        if (entry.isDirectory()) await walk(join(dir, entry.name));
        else if (entry.name.endsWith(".crate")) found.push(entry.name);
      }
    };
    await walk(b.depsDir);
    if (b.ok || found.length > 0) {
      tally.foreignPartsSeen += 1;
      broken(`B's job without a credential was given A's private crate (${found.join(", ") || "provided"})`);
    }
  } finally {
    await registry.close();
    await rm(root, { recursive: true, force: true });
  }
}

await runTrial("T3", "cache poisoning", async () => {
  const tally: Tally = {
    probes: 0,
    poisonSent: 0,
    poisonAccepted: 0,
    foreignPartsSeen: 0,
    badBlobs: 0,
    blobs: 0,
    broken: [],
  };
  const dialects = trialDialects();
  for (const dialect of dialects) {
    const t = await testApp(await dialect.openFresh());
    try {
      await sourceParts(t, dialect.name, tally);
      await placements(t, dialect.name, tally);
    } finally {
      await t.close();
    }
  }
  await lineageStore(tally);
  await crateCache(tally);
  await gatewayScopes(tally);
  return {
    figure:
      `${count(tally.probes)} probes (source parts and placements on ${dialects.map((d) => d.name).join(" and ")}, ` +
      `a host's lineage store, crate cache and dependency gateway): ${tally.poisonSent} foreign or wrong bytes ` +
      `sent under a digest or checksum, ${tally.poisonAccepted} accepted; ${tally.foreignPartsSeen} parts, lineages ` +
      `or crates of another tenant found; ${tally.badBlobs} of ${count(tally.blobs)} stored blobs not their digest's bytes; ` +
      `${tally.broken.length} broken promises`,
    broken: tally.broken,
  };
});
