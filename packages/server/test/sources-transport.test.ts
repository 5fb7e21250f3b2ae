import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { inflateRawSync } from "node:zlib";
import { cleanupExpiredUploads, onboardRepository, readJobManifest } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { readSourceFile } from "../src/domain/jobs/source-manifest.js";
import {
  appWithTenant,
  bearer,
  personWithToken,
  type TestApp,
  tenantWithRepository,
  testApp,
} from "../src/testing/harness.js";
import { type Archive, archiveOf, archiveSubmission, Sources, sha256 } from "./source-archives.js";

const CRATE = [
  { path: "Cargo.toml", content: '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n' },
  { path: "scripts/run.sh", content: "#!/bin/sh\necho hi\n", executable: true },
  { path: "src/lib.rs", content: "pub fn f() -> u32 { 7 }\n" },
];
const LINKS = [{ path: "src/alias.rs", target: "lib.rs" }];

/** Resolves once the staging directory holds no file (they are removed as each response closes). */
async function stagingEmptied(directory: string): Promise<void> {
  while (existsSync(directory) && readdirSync(directory).length > 0) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

for (const dialect of DIALECTS) {
  describe(`sources: the streamed archive transport over HTTP (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let member: { tenant: string; token: string };
    let sources: Sources;
    let other: Sources;

    before(async () => {
      ({ t, person: member } = await appWithTenant(dialect, { role: "member" }));
      await onboardRepository(
        t.storage,
        { tenantId: member.tenant, name: "acme/other", onboardedBy: "test" },
        t.clock.now(),
      );
      sources = new Sources(t.app, member.token);
      const stranger = await tenantWithRepository(t.storage, { role: "member" });
      other = new Sources(t.app, stranger.token);
    });
    after(() => t.close());

    const submit = async (body: unknown, key: string, token = member.token) => {
      const res = await t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
        payload: JSON.stringify(body),
      });
      return { status: res.statusCode, body: res.body, json: () => JSON.parse(res.body) };
    };
    const jobCount = async () =>
      Number(
        (
          await t.storage.db
            .selectFrom("jobs")
            .select((e) => e.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it("reserve → check → put → complete → verified → one job; every repeat answers the original", async () => {
      const capabilities = (await sources.capabilities()).json();
      assert.equal(capabilities.max_chunk_bytes, 4194304);
      assert.deepEqual(capabilities.format_versions, [1]);
      assert.equal(capabilities.tenant_reservations.max_unclaimed_uploads, 32);
      assert.equal((await sources.capabilities("acme/unknown")).status, 404);

      const archive = archiveOf(CRATE, LINKS, { partBytes: 64 });
      assert.ok(archive.parts.length >= 2);
      const reserved = await sources.reserve(archive.reservation, "up-flow");
      assert.equal(reserved.status, 200, reserved.body);
      const upload = reserved.json();
      assert.equal(upload.state, "reserved");
      assert.equal(upload.manifest_sha256, archive.manifestSha256);
      assert.deepEqual(upload.missing_parts, [{ first: 1, last: archive.parts.length }]);
      assert.equal(upload.counts_toward_reservation, true);
      assert.equal(Date.parse(upload.expires_at) - Date.parse(upload.reserved_at), 3600_000);
      assert.equal((await sources.capabilities()).json().tenant_reservations.unclaimed_uploads, 1);

      // The same reservation again is the same upload; a changed one under the key conflicts.
      const again = await sources.reserve(archive.reservation, "up-flow");
      assert.deepEqual(again.json(), upload);
      const changed = structuredClone(archive.reservation);
      changed.manifest.entries[0].executable = true;
      const conflict = await sources.reserve(changed, "up-flow");
      assert.equal(conflict.status, 409);
      assert.equal(conflict.json().code, "conflict");
      // Member order is not part of the identity; the part layout is.
      const r = archive.reservation;
      const reordered = {
        manifest: {
          parts: r.manifest.parts.map((p: object) => Object.fromEntries(Object.entries(p).reverse())),
          entries: r.manifest.entries.map((e: object) => Object.fromEntries(Object.entries(e).reverse())),
        },
        totals: Object.fromEntries(Object.entries(r.totals).reverse()),
        format_version: r.format_version,
        repository: r.repository,
      };
      assert.deepEqual((await sources.reserve(reordered, "up-flow")).json(), upload);
      const relaid = archiveOf(CRATE, LINKS, { partBytes: 4096 });
      assert.equal(relaid.manifestSha256, archive.manifestSha256);
      assert.equal((await sources.reserve(relaid.reservation, "up-flow")).status, 409, "same files, other parts");

      const first = archive.parts[0] as Buffer;
      const absent = (await sources.check("up-flow", 1, sha256(first))).json();
      assert.deepEqual(absent, {
        upload: "up-flow",
        part: 1,
        sha256: sha256(first),
        present: false,
        origin: null,
        bytes: null,
      });
      // Chunk keys must name the path's upload.
      const wrongKey = await sources.put("up-flow", 1, first, "up-other");
      assert.equal(wrongKey.status, 400);
      assert.match(wrongKey.json().detail, /up-other.*up-flow/);
      assert.equal((await sources.put("up-flow", 1, first)).status, 204);
      assert.equal((await sources.put("up-flow", 1, first)).status, 204, "a repeat with the same bytes verifies");
      const changedBytes = await sources.put("up-flow", 1, Buffer.concat([first.subarray(1), Buffer.from("!")]));
      assert.equal(changedBytes.status, 409);
      assert.equal(changedBytes.json().code, "conflict");
      const held = (await sources.check("up-flow", 1, sha256(first))).json();
      assert.equal(held.present, true);
      assert.equal(held.origin, "uploaded");
      assert.equal(held.bytes, first.length);

      for (const [i, bytes] of archive.parts.entries()) {
        if (i > 0) assert.equal((await sources.put("up-flow", i + 1, bytes)).status, 204);
      }
      assert.equal((await sources.complete("up-flow", "up-else")).status, 400);
      const completed = await sources.complete("up-flow");
      assert.equal(completed.status, 200, completed.body);
      const verified = completed.json();
      assert.equal(verified.state, "verified");
      assert.deepEqual(verified.missing_parts, []);
      assert.equal(verified.parts_received, archive.parts.length);
      assert.ok(verified.completed_by);
      // Repeated completion returns the same upload and preserves the completer, even from someone else.
      const colleague = await personWithToken(t.storage, { tenant: member.tenant, role: "member" });
      const repeat = await new Sources(t.app, colleague.token).complete("up-flow");
      assert.equal(repeat.status, 200);
      assert.deepEqual(repeat.json(), verified);
      // Reads are bound to the tenant and the repository.
      assert.equal((await sources.status("up-flow", "acme/other")).status, 404);
      assert.equal((await other.status("up-flow")).status, 404);
      assert.equal((await sources.status("up-flow")).json().state, "verified");

      const jobsBefore = await jobCount();
      const job = await submit(archiveSubmission("up-flow", archive.manifestSha256), "job-flow");
      assert.equal(job.status, 200, job.body);
      const id = job.json();
      assert.equal((await submit(archiveSubmission("up-flow", archive.manifestSha256), "job-flow")).json(), id);
      const second = await submit(archiveSubmission("up-flow", archive.manifestSha256), "job-flow-2");
      assert.equal(second.status, 409);
      assert.match(second.json().detail, new RegExp(id));
      assert.equal(await jobCount(), jobsBefore + 1);
      const claimed = (await sources.status("up-flow")).json();
      assert.deepEqual(claimed.admission.job, id);
      assert.equal(claimed.admission.claimed, true);
      assert.equal(claimed.counts_toward_reservation, false);
      assert.equal((await sources.capabilities()).json().tenant_reservations.unclaimed_uploads, 0);

      // The job's source is exactly the archive: files by their digests, the symlink as a link.
      const manifest = JSON.parse((await readJobManifest(t.storage, id)) ?? "null");
      assert.deepEqual(
        manifest.map((e: { path: string; kind?: string; target?: string; executable: boolean }) => [
          e.path,
          e.kind ?? "file",
          e.target ?? null,
          e.executable,
        ]),
        [
          ["Cargo.toml", "file", null, false],
          ["scripts/run.sh", "file", null, true],
          ["src/alias.rs", "symlink", "lib.rs", false],
          ["src/lib.rs", "file", null, false],
        ],
      );
      for (const entry of manifest.filter((e: { kind?: string }) => e.kind !== "symlink")) {
        const source = CRATE.find((f) => f.path === entry.path);
        // The job gets each file as slices of the verified part blobs, not as a copy of its own.
        assert.ok(entry.segments.length > 0, `${entry.path} names its segments`);
        assert.equal((await readSourceFile(t.deps.blobs, entry)).toString(), source?.content);
      }
    });

    it("dedupes per tenant: the same tenant reuses held parts, another tenant must send its own", async () => {
      const archive = archiveOf([{ path: "a.txt", content: "shared bytes\n" }], [], { partBytes: 64 });
      assert.equal((await sources.upload(archive, "dedupe-1")).json().state, "verified");
      const again = await sources.reserve(archive.reservation, "dedupe-2");
      assert.equal(again.status, 200);
      // The reservation attaches what the tenant holds: nothing is left to send.
      assert.deepEqual(again.json().missing_parts, []);
      assert.equal(again.json().parts_received, 1);
      const part = archive.parts[0] as Buffer;
      const reused = (await sources.check("dedupe-2", 1, sha256(part))).json();
      assert.equal(reused.present, true);
      assert.equal(reused.origin, "reused");
      const done = (await sources.complete("dedupe-2")).json();
      assert.equal(done.state, "verified");
      assert.equal(done.parts_received, 1);

      const foreignReservation = await other.reserve(archive.reservation, "dedupe-1");
      assert.equal(foreignReservation.status, 200);
      assert.deepEqual(foreignReservation.json().missing_parts, [{ first: 1, last: 1 }], "never another tenant's");
      const foreign = (await other.check("dedupe-1", 1, sha256(part))).json();
      assert.equal(foreign.present, false, "another tenant's identical chunk is no oracle");
      assert.equal((await other.complete("dedupe-1")).status, 409);
      assert.equal((await other.put("dedupe-1", 1, part)).status, 204);
      assert.equal((await other.complete("dedupe-1")).json().state, "verified");
    });

    it("stores a manifest compressed in its row, and still serves an upload reserved before (its manifest as text)", async () => {
      const row = (upload: string) =>
        t.storage.db
          .selectFrom("source_uploads")
          .select(["manifest", "manifest_deflated"])
          .where("tenant_id", "=", member.tenant)
          .where("upload", "=", upload)
          .executeTakeFirstOrThrow();
      const archive = archiveOf(CRATE, LINKS, { partBytes: 64 });
      assert.equal((await sources.reserve(archive.reservation, "deflated")).status, 200);
      const stored = await row("deflated");
      assert.equal(stored.manifest, "", "no manifest text in the row");
      assert.ok(stored.manifest_deflated !== null);
      assert.deepEqual(
        JSON.parse(inflateRawSync(stored.manifest_deflated).toString("utf8")),
        archive.reservation.manifest,
      );

      // A row as reserved before migration 0040: the text, nothing compressed. Its parts (each
      // checked against the manifest), completion (verified against it) and job (admitted from
      // it) all read the text.
      const older = archiveOf([...CRATE, { path: "src/old.rs", content: "// before\n" }], LINKS, { partBytes: 64 });
      assert.equal((await sources.reserve(older.reservation, "as-text")).status, 200);
      const compressed = (await row("as-text")).manifest_deflated;
      assert.ok(compressed !== null);
      await t.storage.db
        .updateTable("source_uploads")
        .set({ manifest: inflateRawSync(compressed).toString("utf8"), manifest_deflated: null })
        .where("tenant_id", "=", member.tenant)
        .where("upload", "=", "as-text")
        .execute();
      for (const [index, bytes] of older.parts.entries()) {
        const put = await sources.put("as-text", index + 1, bytes);
        assert.ok(put.status === 204, `part ${index + 1}: ${put.body}`);
      }
      assert.equal((await sources.complete("as-text")).json().state, "verified");
      const job = await submit(archiveSubmission("as-text", older.manifestSha256), "job-as-text");
      assert.equal(job.status, 200, job.body);
    });

    it("accepts a reused pack that also holds an old file's bytes; the job gets only the manifest's files", async () => {
      // The first upload packs an old and a kept file together; after the edit the client points
      // the kept file into that pack (held: attached, not sent) and sends the new file alone.
      const old = "fn old() {}\n".repeat(3);
      const kept = "fn kept() {}\n".repeat(5);
      const first = archiveOf(
        [
          { path: "src/a.rs", content: old },
          { path: "src/b.rs", content: kept },
        ],
        [],
      );
      assert.equal(first.parts.length, 1);
      assert.equal((await sources.upload(first, "reuse-1")).json().state, "verified");
      const pack = first.parts[0] as Buffer;
      const edited = Buffer.from("fn new() {}\n");
      const reservation = structuredClone(first.reservation);
      const [a, b] = reservation.manifest.entries;
      a.size = edited.length;
      a.sha256 = sha256(edited);
      a.segments = [{ part: 2, offset: 0, length: edited.length }];
      assert.deepEqual(b.segments, [{ part: 1, offset: old.length, length: kept.length }]);
      reservation.manifest.parts.push({ part: 2, sha256: sha256(edited), bytes: edited.length });
      reservation.totals.file_bytes = edited.length + kept.length;
      reservation.totals.parts = 2;
      reservation.totals.part_bytes = pack.length + edited.length;
      reservation.totals.metadata_bytes = Buffer.byteLength(
        `file\t0\t${edited.length}\t${sha256(edited)}\tsrc/a.rs\nfile\t0\t${kept.length}\t${sha256(kept)}\tsrc/b.rs\n`,
      );
      const reserved = await sources.reserve(reservation, "reuse-2");
      assert.equal(reserved.status, 200, reserved.body);
      assert.deepEqual(reserved.json().missing_parts, [{ first: 2, last: 2 }], "the old pack is attached");
      assert.equal((await sources.put("reuse-2", 2, edited)).status, 204);
      const done = await sources.complete("reuse-2");
      assert.equal(done.json().state, "verified", done.body);

      const job = await submit(archiveSubmission("reuse-2", done.json().manifest_sha256), "job-reuse");
      assert.equal(job.status, 200, job.body);
      const files = JSON.parse((await readJobManifest(t.storage, job.json())) ?? "null");
      assert.deepEqual(
        files.map((e: { path: string }) => e.path),
        ["src/a.rs", "src/b.rs"],
      );
      assert.equal((await readSourceFile(t.deps.blobs, files[0])).toString(), edited.toString());
      assert.equal((await readSourceFile(t.deps.blobs, files[1])).toString(), kept);
    });

    it("refuses every malformed manifest, naming the entry and the problem", async () => {
      const base = () => archiveOf(CRATE, LINKS, { partBytes: 64 }).reservation;
      const GiB = 2 ** 30;
      // biome-ignore lint/suspicious/noExplicitAny: reservations are edited freely here.
      type R = any;
      const edit = (change: (r: R) => void) => (r: R) => {
        change(r);
        return r;
      };
      const cases: [string, (r: R) => R, RegExp][] = [
        [
          "path traversal",
          edit((r) => {
            r.manifest.entries[0].path = "../Cargo.toml";
          }),
          /entries\[0\]\.path.*\.\.\/Cargo\.toml/,
        ],
        [
          "absolute path",
          edit((r) => {
            r.manifest.entries[0].path = "/etc/passwd";
          }),
          /entries\[0\]\.path.*\/etc\/passwd/,
        ],
        [
          "backslash",
          edit((r) => {
            r.manifest.entries[0].path = "a\\b";
          }),
          /entries\[0\]\.path.*backslash/,
        ],
        [
          "duplicate path",
          edit((r) => {
            r.manifest.entries[2].path = r.manifest.entries[1].path;
          }),
          /entries\[2\]\.path "scripts\/run\.sh" duplicates/,
        ],
        [
          "unsorted",
          edit((r) => {
            r.manifest.entries[0].path = "zzz";
          }),
          /entries\[1\]\.path .*out of order/,
        ],
        [
          "file and directory clash",
          () => {
            const a = archiveOf([
              { path: "src", content: "x" },
              { path: "src/lib.rs", content: "y" },
            ]);
            return a.reservation;
          },
          /entries\[1\]\.path "src\/lib\.rs" lies under "src"/,
        ],
        [
          "symlink escaping the tree",
          () => archiveOf([{ path: "x", content: "x" }], [{ path: "a/b", target: "../../x" }]).reservation,
          /symlink "a\/b" -> "\.\.\/\.\.\/x" escapes the tree/,
        ],
        [
          "symlink escaping through another symlink",
          () =>
            archiveOf(
              [{ path: "x", content: "x" }],
              [
                { path: "d/l1", target: ".." },
                { path: "d/l2", target: "l1/../y" },
              ],
            ).reservation,
          /symlink "d\/l2" -> "l1\/\.\.\/y" escapes the tree/,
        ],
        [
          "absolute symlink target",
          () => archiveOf([{ path: "x", content: "x" }], [{ path: "l", target: "/etc/passwd" }]).reservation,
          /entries\[0\]\.target/,
        ],
        [
          "oversize entry",
          edit((r) => {
            r.manifest.entries[0].size = GiB + 1;
          }),
          /entries\[0\]\.size/,
        ],
        [
          "file bytes over budget (declared)",
          edit((r) => {
            r.totals.file_bytes = GiB + 1;
          }),
          /totals\.file_bytes .*1 GiB/,
        ],
        [
          "entries over limit (declared)",
          edit((r) => {
            r.totals.entries = 250001;
          }),
          /totals\.entries/,
        ],
        [
          "directories over limit (declared)",
          edit((r) => {
            r.totals.directories = 250001;
          }),
          /totals\.directories/,
        ],
        [
          "metadata over budget (declared)",
          edit((r) => {
            r.totals.metadata_bytes = 32 * 2 ** 20 + 1;
          }),
          /totals\.metadata_bytes .*32 MiB/,
        ],
        [
          "declared totals disagree",
          edit((r) => {
            r.totals.file_bytes -= 1;
          }),
          /totals\.file_bytes is .*the manifest implies/,
        ],
        [
          "part numbering gap",
          edit((r) => {
            r.manifest.parts[1].part = 5;
          }),
          /parts\[1\]\.part is 5/,
        ],
        [
          "segment past its part",
          edit((r) => {
            r.manifest.entries[0].segments[0].offset = 60;
          }),
          /entries\[0\]\.segments\[0\] .*runs past the end of part 1/,
        ],
        [
          "segments not summing to size",
          edit((r) => {
            r.manifest.entries[0].size += 1;
            r.totals.file_bytes += 1;
          }),
          /entries\[0\]\.segments hold .* but .*size is/,
        ],
        [
          "more part bytes outside every segment than inside",
          (r) => {
            const last = r.manifest.parts.at(-1);
            const dead = r.totals.part_bytes + 1;
            last.bytes += dead;
            r.totals.part_bytes += dead;
            return r;
          },
          /part bytes belong to no file segment \(first: part \d+, bytes \d+ to \d+\), more than the \d+ the segments cover/,
        ],
        [
          "unknown format",
          edit((r) => {
            r.format_version = 2;
          }),
          /format_version 2/,
        ],
      ];
      const jobsBefore = await jobCount();
      for (const [name, edit, detail] of cases) {
        const res = await sources.reserve(edit(base()), `bad-${name.replaceAll(" ", "-").replace(/[()]/g, "")}`);
        assert.equal(res.status, 400, `${name}: ${res.body}`);
        assert.equal(res.json().code, "invalid_request", name);
        assert.match(res.json().detail, detail, name);
      }
      assert.equal(await jobCount(), jobsBefore);
      // Nothing was reserved by any of them.
      assert.equal((await sources.status("bad-duplicate-path")).status, 404);
      // The metadata budget measured on the canonical form itself, not only as declared:
      // 250 entries of 4000-byte paths is ~1 MB, so build one just over by declared totals above;
      // here an unreserved repository is not_found.
      const elsewhere = base();
      elsewhere.repository = "acme/not-onboarded";
      assert.equal((await sources.reserve(elsewhere, "bad-repo")).status, 404);
    });

    it("refuses bad chunks and incomplete or unverifiable uploads; no job takes them", async () => {
      // Bytes this tenant holds nowhere yet (a reservation attaches held ones at once).
      const fresh = CRATE.map((f) => ({ ...f, content: `${f.content}// bad chunks\n` }));
      const archive = archiveOf(fresh, [], { partBytes: 64 });
      await sources.reserve(archive.reservation, "chunks");
      const first = archive.parts[0] as Buffer;
      const truncated = await sources.put("chunks", 1, first.subarray(0, first.length - 1));
      assert.equal(truncated.status, 400);
      assert.match(
        truncated.json().detail,
        new RegExp(
          `part 1: got ${first.length - 1} bytes.*declares ${first.length} bytes with sha256 ${sha256(first)}`,
        ),
      );
      const corrupted = Buffer.from(first);
      corrupted[0] = (corrupted[0] ?? 0) ^ 0xff;
      const bad = await sources.put("chunks", 1, corrupted);
      assert.equal(bad.status, 400);
      assert.match(bad.json().detail, new RegExp(`sha256 ${sha256(corrupted)}.*sha256 ${sha256(first)}`));
      const huge = await sources.put("chunks", 1, Buffer.alloc(4 * 2 ** 20 + 1));
      assert.equal(huge.status, 400);
      assert.equal(huge.json().code, "invalid_request");
      assert.equal((await sources.put("chunks", 99, first)).status, 400);
      // Refused bytes leave nothing: not stored under their digest, and (once each response is
      // done) no staging file of the streamed body either.
      for (const refused of [first.subarray(0, first.length - 1), corrupted, Buffer.alloc(4 * 2 ** 20 + 1)]) {
        assert.equal(await t.deps.blobs.has(sha256(refused)), false, "a refused part is not stored");
      }
      assert.equal(await t.deps.blobs.has(sha256(first)), false, "nor the declared bytes, never sent whole");
      await stagingEmptied(t.deps.blobs.stagingDirectory);
      const mismatch = await sources.check("chunks", 1, sha256("something else"));
      assert.equal(mismatch.status, 409);
      assert.match(mismatch.json().detail, /part 1/);

      assert.equal((await sources.put("chunks", 1, first)).status, 204);
      const missing = await sources.complete("chunks");
      assert.equal(missing.status, 409);
      assert.match(
        missing.json().detail,
        new RegExp(`missing parts 2${archive.parts.length > 2 ? `-${archive.parts.length}` : ""}`),
      );
      const unverified = await submit(archiveSubmission("chunks", archive.manifestSha256), "job-unverified");
      assert.equal(unverified.status, 409);
      assert.match(unverified.json().detail, /reserved, not verified/);

      // Parts that cannot produce a declared file: the upload is rejected, naming the path.
      const honest = archiveOf([{ path: "a.txt", content: "real content" }]);
      const lying = structuredClone(honest.reservation);
      lying.manifest.entries[0].sha256 = sha256("other content");
      const claimedDigest = archiveOf([{ path: "a.txt", content: "other content" }]).manifestSha256;
      await sources.reserve(lying, "rejected");
      assert.equal((await sources.put("rejected", 1, honest.parts[0] as Buffer)).status, 204);
      const rejected = await sources.complete("rejected");
      assert.equal(rejected.status, 200, rejected.body);
      assert.equal(rejected.json().state, "rejected");
      assert.equal(rejected.json().rejection.path, "a.txt");
      assert.match(rejected.json().rejection.detail, /a\.txt.*sha256/);
      assert.equal((await sources.complete("rejected")).json().state, "rejected");
      const jobsBefore = await jobCount();
      // The same for a packed file, whose digest chunk.put took while storing the part.
      const pack = archiveOf([
        { path: "a.txt", content: "first" },
        { path: "b.txt", content: "second" },
      ]);
      const lyingPack = structuredClone(pack.reservation);
      lyingPack.manifest.entries[1].sha256 = sha256("third");
      await sources.reserve(lyingPack, "rejected-pack");
      assert.equal((await sources.put("rejected-pack", 1, pack.parts[0] as Buffer)).status, 204);
      const rejectedPack = (await sources.complete("rejected-pack")).json();
      assert.equal(rejectedPack.state, "rejected");
      assert.equal(rejectedPack.rejection.path, "b.txt");
      const onRejected = await submit(archiveSubmission("rejected", claimedDigest), "job-rejected");
      assert.equal(onRejected.status, 409);
      assert.match(onRejected.json().detail, /rejected/);

      // Another repository's or another tenant's verified upload: not_found; a wrong digest: conflict.
      const good = archiveOf([{ path: "b.txt", content: "b" }], [], { repository: "acme/other" });
      await new Sources(t.app, member.token, "acme/other").upload(good, "other-repo");
      const otherRepo = await submit(archiveSubmission("other-repo", good.manifestSha256), "job-other-repo");
      assert.equal(otherRepo.status, 404);
      const foreign = archiveOf([{ path: "c.txt", content: "c" }]);
      assert.equal((await other.upload(foreign, "foreign")).json().state, "verified");
      assert.equal((await submit(archiveSubmission("foreign", foreign.manifestSha256), "job-foreign")).status, 404);
      const mine = archiveOf([{ path: "d.txt", content: "d" }]);
      await sources.upload(mine, "mine");
      const wrongDigest = await submit(archiveSubmission("mine", good.manifestSha256), "job-wrong-digest");
      assert.equal(wrongDigest.status, 409);
      assert.match(wrongDigest.json().detail, /manifest_sha256/);
      assert.equal((await submit(archiveSubmission("never", mine.manifestSha256), "job-never")).status, 404);
      // schema_version must match the source form.
      const v1 = { ...archiveSubmission("mine", mine.manifestSha256), schema_version: 1 };
      assert.equal((await submit(v1, "job-v1-archive")).status, 400);
      assert.equal(await jobCount(), jobsBefore);
    });

    it("expires unclaimed uploads after one hour: gone for mutations, expired to reads", async () => {
      const archive: Archive = archiveOf(
        [
          { path: "e.txt", content: "expiring" },
          { path: "g.txt", content: "held" },
        ],
        [],
        {
          partBytes: 8,
        },
      );
      await sources.reserve(archive.reservation, "expiring");
      assert.equal((await sources.put("expiring", 2, archive.parts[1] as Buffer)).status, 204);
      const verifiedArchive = archiveOf([{ path: "f.txt", content: "verified then expired" }]);
      await sources.upload(verifiedArchive, "expiring-verified");
      await t.clock.advance(3_600_000);
      const part = archive.parts[0] as Buffer;
      for (const res of [
        await sources.put("expiring", 1, part),
        await sources.put("expiring", 2, archive.parts[1] as Buffer),
        await sources.check("expiring", 1, sha256(part)),
        await sources.complete("expiring"),
        await sources.reserve(archive.reservation, "expiring"),
        await submit(archiveSubmission("expiring-verified", verifiedArchive.manifestSha256), "job-expired"),
      ]) {
        assert.equal(res.status, 410, res.body);
        assert.equal(res.json().code, "gone");
      }
      const status = (await sources.status("expiring")).json();
      assert.equal(status.state, "expired");
      assert.equal(status.counts_toward_reservation, true, "expired bytes count until cleanup");
      await cleanupExpiredUploads(t.storage, t.clock.now());
      assert.equal((await sources.status("expiring")).json().counts_toward_reservation, false);
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`sources: tenant reservation limits (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await testApp(await dialect.openFresh());
    });
    after(() => t.close());

    const tenantSources = async () => {
      const person = await tenantWithRepository(t.storage, { role: "member" });
      return new Sources(t.app, person.token);
    };

    it("refuses the 33rd unclaimed upload, counting expired ones until cleanup", async () => {
      const sources = await tenantSources();
      for (let i = 0; i < 32; i++) {
        const res = await sources.reserve(archiveOf([{ path: "a", content: `${i}` }]).reservation, `u${i}`);
        assert.equal(res.status, 200, res.body);
      }
      const next = archiveOf([{ path: "a", content: "33" }]).reservation;
      const refused = await sources.reserve(next, "u32");
      assert.equal(refused.status, 409);
      assert.match(refused.json().detail, /32 unclaimed uploads/);
      await t.clock.advance(3601 * 1000);
      assert.equal((await sources.reserve(next, "u33")).status, 409, "expired uploads still count");
      assert.equal((await sources.capabilities()).json().tenant_reservations.unclaimed_uploads, 32);
      await cleanupExpiredUploads(t.storage, t.clock.now());
      assert.equal((await sources.reserve(next, "u34")).status, 200);
    });

    it("refuses a reservation that would pass 16 GiB of part bytes (declared; no byte sent)", async () => {
      const sources = await tenantSources();
      const GiB = 2 ** 30;
      const MiB4 = 4 * 2 ** 20;
      // One 1 GiB file over 256 parts of 4 MiB: only the manifest travels.
      const gib = (n: number) => {
        const parts = Array.from({ length: 256 }, (_, i) => ({
          part: i + 1,
          sha256: sha256(`p${n}-${i}`),
          bytes: MiB4,
        }));
        const file = {
          kind: "file",
          path: "big.bin",
          executable: false,
          size: GiB,
          sha256: sha256(`f${n}`),
          segments: parts.map((p) => ({ part: p.part, offset: 0, length: MiB4 })),
        };
        const canonical = `file\t0\t${GiB}\t${file.sha256}\tbig.bin\n`;
        return {
          repository: "acme/widget",
          format_version: 1,
          totals: {
            file_bytes: GiB,
            entries: 1,
            directories: 0,
            metadata_bytes: canonical.length,
            parts: 256,
            part_bytes: GiB,
          },
          manifest: { entries: [file], parts },
        };
      };
      for (let n = 0; n < 16; n++) {
        const res = await sources.reserve(gib(n), `g${n}`);
        assert.equal(res.status, 200, res.body);
      }
      assert.equal((await sources.capabilities()).json().tenant_reservations.reserved_bytes, 16 * GiB);
      const refused = await sources.reserve(archiveOf([{ path: "a", content: "one more byte" }]).reservation, "g16");
      assert.equal(refused.status, 409);
      assert.match(refused.json().detail, /17179869184/);
    });
  });
}
