import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { deflateRawSync } from "node:zlib";
import { sql } from "kysely";
import {
  claimUpload,
  cleanupExpiredUploads,
  completeUpload,
  createTenant,
  findTenantChunk,
  readUpload,
  readUploadManifest,
  recordUploadPart,
  reserveUpload,
  type Storage,
  tenantReservations,
  type UploadReservation,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-22T07:00:00.000Z") };
const T0 = new Date("2026-11-22T08:00:00.000Z");
const plus = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const GiB = 2 ** 30;
/** The columns of index `name`, in order, on either engine. */
async function indexColumns(storage: Storage, name: string): Promise<string[]> {
  if (storage.dialect === "sqlite") {
    const rows = await sql<{ name: string }>`select name from pragma_index_info(${name}) order by seqno`.execute(
      storage.db,
    );
    return rows.rows.map((row) => row.name);
  }
  const rows = await sql<{ column: string }>`
    select a.attname as "column" from pg_index i
    join pg_class c on c.oid = i.indexrelid
    join lateral unnest(i.indkey) with ordinality as k(attnum, position) on true
    join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
    where c.relname = ${name} order by k.position`.execute(storage.db);
  return rows.rows.map((row) => row.column);
}

const digest = (n: number) => n.toString(16).padStart(64, "0");

for (const dialect of DIALECTS) {
  describe(`source uploads [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    const reserve = (tenantId: string, upload: string, over: Partial<UploadReservation> = {}) =>
      reserveUpload(storage, {
        tenantId,
        upload,
        repository: `${tenantId}/repo`,
        reservedBy: "person:p1",
        requestHash: `hash-${upload}`,
        formatVersion: 1,
        manifestDeflated: deflateRawSync(JSON.stringify({ entries: [], parts: [] })),
        manifestSha256: digest(1),
        totals: "{}",
        partCount: 2,
        partBytes: 100,
        now: T0,
        expiresAt: plus(3600),
        maxBytes: 16 * GiB,
        maxUnclaimedUploads: 32,
        ...over,
      });

    before(async () => {
      storage = await dialect.openFresh();
      for (const id of ["acme", "globex", "limits", "bytes", "race"]) await createTenant(storage, { id }, clock.now());
    });
    after(async () => {
      await storage?.close();
    });

    it("reserves once per key; a repeat finds the original", async () => {
      const first = await reserve("acme", "up-1");
      assert.equal(first.kind, "created");
      const again = await reserve("acme", "up-1", { requestHash: "other" });
      assert.equal(again.kind, "existing");
      assert.equal(again.kind === "existing" && again.upload.request_hash, "hash-up-1");
      // Keys are per tenant.
      assert.equal((await reserve("globex", "up-1")).kind, "created");
    });

    it("holds parts per upload and indexes digests per tenant only", async () => {
      const part = { tenantId: "acme", upload: "up-1", bytes: 50, now: T0 };
      const one = await recordUploadPart(storage, { ...part, part: 1, sha256: digest(11), origin: "uploaded" });
      assert.equal(one.kind, "recorded");
      const repeat = await recordUploadPart(storage, { ...part, part: 1, sha256: digest(99), origin: "uploaded" });
      assert.equal(repeat.kind, "held");
      assert.equal(repeat.kind === "held" && repeat.part.sha256, digest(11));
      assert.deepEqual(await findTenantChunk(storage, { tenantId: "acme", sha256: digest(11) }), {
        sha256: digest(11),
        bytes: 50,
      });
      assert.equal(await findTenantChunk(storage, { tenantId: "globex", sha256: digest(11) }), undefined);
      const read = await readUpload(storage, { tenantId: "acme", upload: "up-1" });
      assert.deepEqual(
        read?.parts.map((p) => [p.part, p.origin]),
        [[1, "uploaded"]],
      );
      assert.equal(await readUpload(storage, { tenantId: "globex", upload: "nope" }), undefined);
    });

    it("attaches, with a new reservation, the parts its tenant holds (digest and length), never another tenant's", async () => {
      // acme holds digest(11) (50 bytes) since the test above.
      const attachHeld = [
        { part: 1, sha256: digest(11), bytes: 50 },
        { part: 2, sha256: digest(11), bytes: 51 },
        { part: 3, sha256: digest(77), bytes: 10 },
      ];
      const created = await reserve("acme", "up-attach", { attachHeld, partCount: 3 });
      assert.equal(created.kind, "created");
      const held = await readUpload(storage, { tenantId: "acme", upload: "up-attach" });
      // The reservation's answer and the upload's reads carry its header, never the manifest's bytes.
      for (const upload of [created.kind === "created" ? created.upload : {}, held?.upload ?? {}]) {
        assert.equal("manifest_deflated" in upload || "manifest" in upload, false);
      }
      assert.ok((await readUploadManifest(storage, { tenantId: "acme", upload: "up-attach" }))?.manifest_deflated);
      assert.deepEqual(
        held?.parts.map((p) => [p.part, p.sha256, Number(p.bytes), p.origin]),
        [[1, digest(11), 50, "reused"]],
      );
      // Another tenant's reservation of the same digest holds nothing.
      assert.equal((await reserve("globex", "up-attach", { attachHeld, partCount: 3 })).kind, "created");
      assert.deepEqual((await readUpload(storage, { tenantId: "globex", upload: "up-attach" }))?.parts, []);
      // A repeat of the key finds the original and attaches nothing more, even what acme holds by then.
      await reserve("acme", "up-holder");
      await recordUploadPart(storage, {
        tenantId: "acme",
        upload: "up-holder",
        part: 1,
        sha256: digest(77),
        bytes: 10,
        origin: "uploaded",
        now: T0,
      });
      assert.equal((await reserve("acme", "up-attach", { attachHeld, partCount: 3 })).kind, "existing");
      assert.equal((await readUpload(storage, { tenantId: "acme", upload: "up-attach" }))?.parts.length, 1);
    });

    it("records completion once, preserving the first completer, and refuses parts afterwards", async () => {
      await recordUploadPart(storage, {
        tenantId: "acme",
        upload: "up-1",
        part: 2,
        sha256: digest(12),
        bytes: 50,
        origin: "reused",
        now: T0,
      });
      const done = await completeUpload(storage, {
        tenantId: "acme",
        upload: "up-1",
        completedBy: "person:first",
        now: plus(10),
        outcome: { state: "verified" },
      });
      assert.equal(done?.state, "verified");
      const again = await completeUpload(storage, {
        tenantId: "acme",
        upload: "up-1",
        completedBy: "person:second",
        now: plus(20),
        outcome: { state: "rejected", rejection: { path: null, detail: "x" } },
      });
      assert.equal(again?.state, "verified");
      assert.equal(again?.completed_by, "person:first");
      assert.equal(again?.verified_at, plus(10).toISOString());
      const late = await recordUploadPart(storage, {
        tenantId: "acme",
        upload: "up-1",
        part: 3,
        sha256: digest(13),
        bytes: 1,
        origin: "uploaded",
        now: T0,
      });
      assert.equal(late.kind, "not_reserved");
    });

    it("claims a verified upload for exactly one job, and never a mismatched or expired one", async () => {
      const claim = (jobId: string, over: { manifestSha256?: string; now?: Date } = {}) =>
        claimUpload(storage, {
          tenantId: "acme",
          upload: "up-1",
          manifestSha256: digest(1),
          jobId,
          now: plus(30),
          ...over,
        });
      assert.equal(await claim("job_a", { manifestSha256: digest(2) }), false);
      assert.equal(await claim("job_a", { now: plus(3600) }), false);
      const before = await tenantReservations(storage, "acme");
      assert.equal(await claim("job_a"), true);
      assert.equal(await claim("job_b"), false);
      const read = await readUpload(storage, { tenantId: "acme", upload: "up-1" });
      assert.equal(read?.upload.claimed_job, "job_a");
      const afterClaim = await tenantReservations(storage, "acme");
      assert.equal(afterClaim.unclaimedUploads, before.unclaimedUploads - 1);
      assert.equal(afterClaim.reservedBytes, before.reservedBytes - 100);
    });

    it("reads a tenant's reservations from an index alone, never an upload's row with its manifest", async () => {
      // The where clause and sums of tenantReservations (sources/upload-row.ts).
      const query = sql`
        select cast(coalesce(sum(part_bytes), 0) as bigint), cast(count(*) as bigint) from source_uploads
        where tenant_id = ${"acme"} and claimed_job is null and cleaned_at is null`;
      if (dialect.name === "sqlite") {
        // SQLite reads a column stored past a large one (the manifest) through its overflow pages.
        const plan = await sql<{ detail: string }>`explain query plan ${query}`.execute(storage.db);
        assert.match(plan.rows.map((row) => row.detail).join("\n"), /USING COVERING INDEX source_uploads_unclaimed/);
      }
      const columns = await indexColumns(storage, "source_uploads_unclaimed");
      assert.deepEqual(columns, ["tenant_id", "claimed_job", "cleaned_at", "part_bytes"]);
    });

    it("limits unclaimed uploads per tenant; expired ones count until cleanup", async () => {
      for (let i = 0; i < 32; i++) assert.equal((await reserve("limits", `u${i}`)).kind, "created");
      const refused = await reserve("limits", "u32");
      assert.equal(refused.kind, "over_limit");
      assert.equal(refused.kind === "over_limit" && refused.limit, "uploads");
      assert.equal(refused.kind === "over_limit" && refused.unclaimedUploads, 32);
      // Past expiry they still count…
      const late = plus(3601);
      assert.equal((await reserve("limits", "u33", { now: late, expiresAt: plus(7201) })).kind, "over_limit");
      // …until cleanup releases them (and their parts).
      await recordUploadPart(storage, {
        tenantId: "limits",
        upload: "u0",
        part: 1,
        sha256: digest(5),
        bytes: 100,
        origin: "uploaded",
        now: T0,
      });
      assert.equal(await cleanupExpiredUploads(storage, plus(100)), 0, "nothing has expired yet");
      assert.ok((await cleanupExpiredUploads(storage, late)) >= 32);
      assert.deepEqual(await tenantReservations(storage, "limits"), { reservedBytes: 0, unclaimedUploads: 0 });
      const cleaned = await readUpload(storage, { tenantId: "limits", upload: "u0" });
      assert.notEqual(cleaned?.upload.cleaned_at, null);
      assert.deepEqual(cleaned?.parts, []);
      assert.ok(await findTenantChunk(storage, { tenantId: "limits", sha256: digest(5) }), "the digest stays indexed");
      assert.equal((await reserve("limits", "u33", { now: late, expiresAt: plus(7201) })).kind, "created");
    });

    it("limits reserved part bytes per tenant", async () => {
      for (let i = 0; i < 16; i++) {
        assert.equal((await reserve("bytes", `b${i}`, { partBytes: GiB })).kind, "created");
      }
      const refused = await reserve("bytes", "b16", { partBytes: 1 });
      assert.equal(refused.kind === "over_limit" && refused.limit, "bytes");
      assert.equal(refused.kind === "over_limit" && refused.reservedBytes, 16 * GiB);
    });

    it("never lets racing reservations pass the limit together", async () => {
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          reserveUpload(storage, {
            tenantId: "race",
            upload: `r${i}`,
            repository: "race/repo",
            reservedBy: "p",
            requestHash: "h",
            formatVersion: 1,
            manifestDeflated: deflateRawSync("{}"),
            manifestSha256: digest(1),
            totals: "{}",
            partCount: 1,
            partBytes: GiB,
            now: T0,
            expiresAt: plus(3600),
            maxBytes: 3 * GiB,
            maxUnclaimedUploads: 32,
          }),
        ),
      );
      assert.equal(results.filter((r) => r.kind === "created").length, 3);
      assert.equal((await tenantReservations(storage, "race")).reservedBytes, 3 * GiB);
    });
  });
}
