/**
 * T11 uploads killed and corrupt chunks, on SQLite and PostgreSQL, through the sources transport.
 * Archives of seeded random files are packed into parts of random sizes; before each part is
 * sent whole, the client does one of (seeded):
 *
 * - kill: sends the part over a real socket and destroys the connection at a random offset of
 *   the body (declared with its full content-length, or chunked), as a client killed mid-upload;
 * - lost answer: sends the whole part and destroys the connection before reading the answer (the
 *   client cannot know whether it was taken);
 * - corrupt: sends bytes that do not match the manifest's digest (one byte flipped at a random
 *   offset, cut short at a random offset, one byte longer, another part's bytes, zeros).
 *
 * It then resumes as a client restarted from scratch would: sources.status for the missing
 * parts and sources.chunk.check for each, sending only the parts not held, and completes. After
 * a part is held, a corrupt repeat of it must be conflict and change nothing.
 *
 * Broken promises: a corrupt or cut part accepted (its bytes count as wrongly accepted); an
 * upload not verified after resuming; a held part or a file whose stored bytes differ from the
 * original (bytes lost); a blob in the store that is no part of any archive.
 */
import { readdir } from "node:fs/promises";
import { request } from "node:http";
import { join } from "node:path";
import { LocalBlobStore, onboardRepository } from "@kiln/storage";
import { personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { listen } from "../src/testing/job-fixtures.js";
import { type Archive, archiveOf, Sources, sha256 } from "../test/source-archives.js";
import { REPOSITORY } from "./fixtures.js";
import { SeededRandom, trialSeed } from "./seeded-random.js";
import { count, runTrial, trialDialects } from "./trial.js";

const SEED = trialSeed("T11", 11);
const UPLOADS = Number(process.env.KILN_T11_UPLOADS ?? 12);

interface Tally {
  uploads: number;
  completed: number;
  parts: number;
  partBytes: number;
  kills: number;
  lostAnswers: number;
  corrupt: number;
  corruptRefused: number;
  repeatsRefused: number;
  heldAtResume: number;
  wronglyAcceptedBytes: number;
  lostBytes: number;
  strayBlobs: number;
  broken: string[];
}

/** Files of seeded random bytes (some empty, some larger than a part), under a few directories. */
function randomArchive(random: SeededRandom): Archive {
  const files = Array.from({ length: random.int(1, 12) }, (_, i) => {
    const size = random.pick([0, 1, random.int(2, 4_096), random.int(4_097, 150_000)]);
    const content = Buffer.alloc(size);
    for (let k = 0; k < size; k++) content[k] = random.int(0, 255);
    return { path: `${random.pick(["src", "tests", "benches/deep/er"])}/f${i}.rs`, content };
  });
  files.push({ path: "Cargo.toml", content: Buffer.from("[package]\nname = 't11'\n") });
  return archiveOf(files, [], { repository: REPOSITORY, partBytes: random.int(1_024, 65_536) });
}

/** The part's bytes made wrong in one of five ways; never equal to the original. */
function corrupted(random: SeededRandom, bytes: Buffer, other: Buffer | undefined): { what: string; bytes: Buffer } {
  const kind = random.int(0, 4);
  if (kind === 0 && bytes.length > 0) {
    const flipped = Buffer.from(bytes);
    const at = random.int(0, bytes.length - 1);
    flipped[at] = (flipped[at] ?? 0) ^ (1 << random.int(0, 7));
    return { what: `a bit flipped at byte ${at}`, bytes: flipped };
  }
  if (kind === 1 && bytes.length > 1) {
    const at = random.int(1, bytes.length - 1);
    return { what: `cut at byte ${at}`, bytes: bytes.subarray(0, at) };
  }
  if (kind === 2 && other !== undefined && !other.equals(bytes)) return { what: "another part's bytes", bytes: other };
  if (kind === 3 && bytes.some((b) => b !== 0)) return { what: "zeros", bytes: Buffer.alloc(bytes.length) };
  return { what: "one byte longer", bytes: Buffer.concat([bytes, Buffer.from([random.int(0, 255)])]) };
}

/**
 * Sends a part over a real socket and kills the connection: after `cutAt` bytes of the body, or,
 * when `cutAt` is the whole body, before reading the answer. Settles once the socket is gone.
 */
function killedPut(
  base: string,
  token: string,
  upload: string,
  part: number,
  bytes: Buffer,
  cutAt: number,
  chunked: boolean,
): Promise<void> {
  return new Promise((resolve) => {
    const url = new URL(`${base}/api/sources/${upload}/chunks/${part}?repository=${encodeURIComponent(REPOSITORY)}`);
    const req = request(url, {
      method: "POST",
      agent: false,
      headers: {
        authorization: `Bearer ${token}`,
        "idempotency-key": upload,
        "content-type": "application/octet-stream",
        ...(chunked ? { "transfer-encoding": "chunked" } : { "content-length": String(bytes.length) }),
      },
    });
    req.on("error", () => resolve());
    req.on("close", () => resolve());
    req.on("response", (res) => {
      res.resume();
      req.destroy();
    });
    // Destroyed once the written bytes have left for the server, so the cut is at `cutAt`; a
    // whole body written is destroyed before its answer is read.
    if (cutAt > 0) req.write(bytes.subarray(0, cutAt), () => req.destroy());
    else {
      req.flushHeaders();
      req.on("socket", (socket) => socket.on("connect", () => setImmediate(() => req.destroy())));
    }
  });
}

async function trialOn(t: TestApp, dialect: string, random: SeededRandom, tally: Tally): Promise<void> {
  const broken = (what: string) => tally.broken.push(`${dialect}: ${what}`);
  const person = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
  await onboardRepository(t.storage, { tenantId: person.tenant, name: REPOSITORY, onboardedBy: "t11" }, t.clock.now());
  const sources = new Sources(t.app, person.token, REPOSITORY);
  const base = await listen(t.app);
  const originals = new Set<string>();

  for (let u = 0; u < UPLOADS; u++) {
    const archive = randomArchive(random);
    const id = `t11-${dialect}-${u}`;
    tally.uploads += 1;
    for (const part of archive.parts) originals.add(sha256(part));
    const reserved = await sources.reserve(archive.reservation, id);
    if (reserved.status !== 200) throw new Error(`reserve ${id}: ${reserved.body}`);

    // ---- the first, troubled pass over the parts.
    for (const [index, bytes] of archive.parts.entries()) {
      const part = index + 1;
      tally.parts += 1;
      tally.partBytes += bytes.length;
      const trouble = random.int(0, 3);
      if (trouble === 0) {
        tally.kills += 1;
        await killedPut(base, person.token, id, part, bytes, random.int(0, bytes.length - 1), random.next() < 0.3);
      } else if (trouble === 1) {
        tally.lostAnswers += 1;
        await killedPut(base, person.token, id, part, bytes, bytes.length, false);
      } else if (trouble === 2) {
        const bad = corrupted(random, bytes, archive.parts[(index + 1) % archive.parts.length]);
        tally.corrupt += 1;
        const res = await sources.put(id, part, bad.bytes);
        if (res.status === 400 && res.json().code === "invalid_request") tally.corruptRefused += 1;
        else {
          if (res.status < 300) tally.wronglyAcceptedBytes += bad.bytes.length;
          broken(`${id} part ${part} with ${bad.what} answered ${res.status} ${res.body.slice(0, 200)}`);
        }
      }
      // trouble 3: this part is simply not sent in the first pass.
    }

    // ---- the resume, as a restarted client: status, then check, then put what is absent.
    const status = await sources.status(id);
    if (status.status !== 200) throw new Error(`status ${id}: ${status.body}`);
    const missing = new Set<number>();
    for (const range of status.json().missing_parts as { first: number; last: number }[])
      for (let p = range.first; p <= range.last; p++) missing.add(p);
    tally.heldAtResume += archive.parts.length - missing.size;
    // A send whose answer was lost may still be finishing on the server; either way check
    // or put settles it (two sends of one part: one records it, the other finds it held).
    for (const part of missing) {
      const bytes = archive.parts[part - 1] ?? Buffer.alloc(0);
      const check = await sources.check(id, part, sha256(bytes));
      if (check.status !== 200) throw new Error(`check ${id}/${part}: ${check.body}`);
      if (check.json().present === true) {
        tally.heldAtResume += 1;
        continue;
      }
      const put = await sources.put(id, part, bytes);
      if (put.status !== 204) broken(`${id} part ${part}: the right bytes answered ${put.status} ${put.body}`);
    }

    // ---- a corrupt repeat of a held part is conflict and changes nothing.
    const target = random.int(0, archive.parts.length - 1);
    const original = archive.parts[target] ?? Buffer.alloc(0);
    const repeat = corrupted(random, original, archive.parts[(target + 1) % archive.parts.length]);
    const repeated = await sources.put(id, target + 1, repeat.bytes);
    if (repeated.status === 409 && repeated.json().code === "conflict") tally.repeatsRefused += 1;
    else {
      if (repeated.status < 300) tally.wronglyAcceptedBytes += repeat.bytes.length;
      broken(`${id}: a held part repeated with ${repeat.what} answered ${repeated.status} ${repeated.body}`);
    }

    const completed = await sources.complete(id);
    if (completed.status === 200 && completed.json().state === "verified") tally.completed += 1;
    else broken(`${id}: complete answered ${completed.status} ${completed.body.slice(0, 300)}`);

    // ---- the stored bytes, read back: each part's blob, and each file reassembled from them.
    const held = await t.storage.db
      .selectFrom("source_upload_parts")
      .select(["part", "sha256", "bytes"])
      .where("tenant_id", "=", person.tenant)
      .where("upload", "=", id)
      .execute();
    for (const [index, bytes] of archive.parts.entries()) {
      const row = held.find((r) => Number(r.part) === index + 1);
      const stored = row === undefined ? undefined : await t.deps.blobs.get(row.sha256).catch(() => undefined);
      if (stored === undefined || !stored.equals(bytes)) {
        tally.lostBytes += bytes.length;
        broken(`${id} part ${index + 1}: the stored bytes are not the part sent`);
      }
    }
  }

  // ---- no blob that is no part of any archive (a cut or corrupt body stored under its digest).
  // The stray-blob sweep lists the local store's shard directories (the trial's default store).
  if (!(t.deps.blobs instanceof LocalBlobStore)) throw new Error("the upload trial inspects a local blob store");
  const root = t.deps.blobs.root;
  for (const shard of await readdir(root).catch(() => [] as string[])) {
    for (const name of await readdir(join(root, shard)).catch(() => [] as string[])) {
      if (/^[0-9a-f]{64}$/.test(name) && !originals.has(name)) {
        tally.strayBlobs += 1;
        broken(`blob ${name} is no part of any archive`);
      }
    }
  }
}

await runTrial("T11", "uploads killed and corrupt chunks", async () => {
  const random = new SeededRandom(SEED);
  const tally: Tally = {
    uploads: 0,
    completed: 0,
    parts: 0,
    partBytes: 0,
    kills: 0,
    lostAnswers: 0,
    corrupt: 0,
    corruptRefused: 0,
    repeatsRefused: 0,
    heldAtResume: 0,
    wronglyAcceptedBytes: 0,
    lostBytes: 0,
    strayBlobs: 0,
    broken: [],
  };
  const engines: string[] = [];
  for (const dialect of trialDialects()) {
    const t = await testApp(await dialect.openFresh());
    try {
      await trialOn(t, dialect.name, random, tally);
      engines.push(dialect.name);
    } finally {
      await t.close();
    }
  }
  return {
    figure:
      `seed ${SEED} (${engines.join(" and ")}): ${tally.uploads} uploads, ${count(tally.parts)} parts ` +
      `(${count(tally.partBytes)} bytes): ${tally.kills} sends killed at random offsets, ${tally.lostAnswers} ` +
      `answers lost, ${tally.corrupt} corrupt parts (${tally.corruptRefused} refused), ${tally.repeatsRefused} ` +
      `corrupt repeats of held parts refused; resumed by status/check (${tally.heldAtResume} parts found ` +
      `held): ${tally.completed}/${tally.uploads} uploads verified, ${count(tally.wronglyAcceptedBytes)} bytes ` +
      `wrongly accepted, ${count(tally.lostBytes)} bytes lost, ${tally.strayBlobs} stray blobs`,
    broken: tally.broken,
  };
});
