import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  appendFileSync,
  chmodSync,
  closeSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { SOURCE_LIMITS, UPLOAD_ID_PATTERN } from "@kiln/contract";
import { CaptureError, captureWorkspace } from "../src/archive/capture.js";
import {
  type Archive,
  buildArchive,
  canonicalManifest,
  LARGE_FILE_BYTES,
  PACK_MIN_BYTES,
  PART_BYTES,
  readPart,
  uploadIdOf,
} from "../src/archive/layout.js";
import { findWorkspaceRoot, repositoryFromRemote, workingDirectory } from "../src/archive/workspace.js";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tree(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(join(tmpdir(), "kiln-cli-archive-"));
  dirs.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const git = (root: string, ...args: string[]) =>
  execFileSync("git", ["-C", root, "-c", "user.email=t@example.com", "-c", "user.name=t", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });

const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

/** Every file's bytes, rebuilt from the parts exactly as the service would. */
function reassemble(archive: Archive): Map<string, Buffer> {
  const parts = new Map(archive.sources.map((s) => [s.part, readPart(s)]));
  for (const p of archive.manifest.parts) {
    const bytes = parts.get(p.part);
    assert.ok(bytes);
    assert.equal(bytes.length, p.bytes);
    assert.ok(p.bytes >= 1 && p.bytes <= SOURCE_LIMITS.maxChunkBytes);
    assert.equal(sha256(bytes), p.sha256, `part ${p.part} digest`);
  }
  const files = new Map<string, Buffer>();
  for (const e of archive.manifest.entries) {
    if (e.kind !== "file") continue;
    const content = Buffer.concat(
      e.segments.map((s) => (parts.get(s.part) ?? Buffer.alloc(0)).subarray(s.offset, s.offset + s.length)),
    );
    assert.equal(content.length, e.size);
    assert.equal(sha256(content), e.sha256, `${e.path} digest`);
    files.set(e.path, content);
  }
  return files;
}

describe("workspace capture", () => {
  it("with git: tracked plus untracked-not-ignored files, executable bits and symlinks; ignored and target/ excluded", () => {
    const root = tree({
      "Cargo.toml": '[package]\nname = "a"\nversion = "0.1.0"\n',
      ".gitignore": "/ignored.txt\n*.log\n",
      "src/lib.rs": "pub fn a() {}\n",
      "script.sh": "#!/bin/sh\necho hi\n",
      "ignored.txt": "secret\n",
      "build.log": "noise\n",
      "target/debug/out": "artifact\n",
      "deleted.rs": "gone\n",
    });
    chmodSync(join(root, "script.sh"), 0o755);
    symlinkSync("src/lib.rs", join(root, "lib-link.rs"));
    git(root, "init", "-q");
    git(root, "add", "Cargo.toml", ".gitignore", "src/lib.rs", "script.sh", "lib-link.rs", "deleted.rs");
    git(root, "commit", "-q", "-m", "init");
    rmSync(join(root, "deleted.rs"));
    writeFileSync(join(root, "src/untracked.rs"), "// new\n");
    const capture = captureWorkspace(root);
    assert.equal(capture.method, "git");
    assert.deepEqual(
      capture.entries.map((e) => e.path),
      [".gitignore", "Cargo.toml", "lib-link.rs", "script.sh", "src/lib.rs", "src/untracked.rs"],
    );
    const byPath = new Map(capture.entries.map((e) => [e.path, e]));
    const script = byPath.get("script.sh");
    assert.ok(script?.kind === "file" && script.executable);
    const lib = byPath.get("src/lib.rs");
    assert.ok(lib?.kind === "file" && !lib.executable);
    const link = byPath.get("lib-link.rs");
    assert.ok(link?.kind === "symlink");
    assert.equal(link.target, "src/lib.rs");
    const archive = buildArchive(capture);
    assert.deepEqual(
      archive.manifest.entries.find((e) => e.path === "lib-link.rs"),
      { kind: "symlink", path: "lib-link.rs", target: "src/lib.rs" },
    );
    const files = reassemble(archive);
    assert.equal(files.get("src/untracked.rs")?.toString(), "// new\n");
    assert.equal(archive.manifest.entries.find((e) => e.path === "script.sh")?.kind, "file");
  });

  it("without git: every file but target/ and .git/, symlinks kept; a link leaving the tree is refused", () => {
    const root = tree({
      "Cargo.toml": "[workspace]\n",
      "a/src/main.rs": "fn main() {}\n",
      "target/x": "no",
      ".git/HEAD": "no",
      "a/target/kept": "a member's target dir is only skipped by git ignore rules\n",
    });
    symlinkSync("../Cargo.toml", join(root, "a/Cargo.toml"));
    const capture = captureWorkspace(root, { git: false });
    assert.equal(capture.method, "walk");
    assert.deepEqual(
      capture.entries.map((e) => `${e.kind}:${e.path}`),
      ["file:Cargo.toml", "symlink:a/Cargo.toml", "file:a/src/main.rs", "file:a/target/kept"],
    );
    symlinkSync("../../etc/passwd", join(root, "a/escape"));
    assert.throws(() => captureWorkspace(root, { git: false }), CaptureError);
  });

  it("without git: a tree of 150,000 files below one directory is walked (no recursion through the call stack)", () => {
    // Spreading a subdirectory's 150,000 paths into its parent's list as call arguments
    // overflowed the stack (a non-git tree of ~120k files failed `kiln cargo`).
    const root = tree({ "Cargo.toml": "[workspace]\n" });
    const filesPerDir = 1_000;
    const dirCount = 150;
    for (let d = 0; d < dirCount; d += 1) {
      const dir = join(root, "vendor", `d${d}`);
      mkdirSync(dir, { recursive: true });
      // Hard links to one empty file per directory: creating 150,000 inodes costs minutes on this
      // machine's disk, and ext4 allows 65,000 links to one inode.
      writeFileSync(join(dir, "f0"), "");
      for (let f = 1; f < filesPerDir; f += 1) linkSync(join(dir, "f0"), join(dir, `f${f}`));
    }
    const capture = captureWorkspace(root, { git: false });
    assert.equal(capture.entries.length, 1 + dirCount * filesPerDir);
    assert.equal(capture.entries[0]?.path, "Cargo.toml");
    assert.equal(capture.entries.at(-1)?.path, "vendor/d99/f999");
  });

  it("paths sort in UTF-8 byte order, not UTF-16 order", () => {
    const root = tree({ "\u{1F600}.txt": "a", "\uFFFD.txt": "b", "z.txt": "c" });
    const paths = captureWorkspace(root, { git: false }).entries.map((e) => e.path);
    assert.deepEqual(paths, ["z.txt", "\uFFFD.txt", "\u{1F600}.txt"]);
  });
});

describe("archive layout", () => {
  const workspace = () => {
    const files: Record<string, string | Buffer> = { "Cargo.toml": "[workspace]\nmembers = []\n" };
    for (let d = 0; d < 3; d++) {
      for (let f = 0; f < 40; f++) files[`crate${d}/src/m${String(f).padStart(2, "0")}.rs`] = randomBytes(5000);
    }
    files["assets/big.bin"] = randomBytes(PART_BYTES * 2 + 12345);
    files["assets/medium.bin"] = randomBytes(LARGE_FILE_BYTES + 1);
    files["assets/empty"] = Buffer.alloc(0);
    files["dense/a.rs"] = randomBytes(LARGE_FILE_BYTES);
    for (let f = 0; f < 70; f++) files[`dense/f${String(f).padStart(2, "0")}.rs`] = randomBytes(60_000);
    return tree(files);
  };

  it("follows the recommended layout and reassembles every file exactly", () => {
    const root = workspace();
    const archive = buildArchive(captureWorkspace(root, { git: false }));
    const files = reassemble(archive);
    assert.equal(files.size, archive.manifest.entries.length);
    const entry = (path: string) => {
      const e = archive.manifest.entries.find((x) => x.path === path);
      assert.ok(e?.kind === "file", path);
      return e;
    };
    // Large files: their own parts, cut at fixed 4 MiB offsets.
    assert.deepEqual(
      entry("assets/big.bin").segments.map((s) => [s.offset, s.length]),
      [
        [0, PART_BYTES],
        [0, PART_BYTES],
        [0, 12345],
      ],
    );
    assert.equal(entry("assets/medium.bin").segments.length, 1, "a file over 1 MiB has a part of its own");
    assert.deepEqual(entry("assets/empty").segments, []);
    // Small files are packed across directories in path order; a pack never passes 4 MiB and
    // ends only once it holds 1 MiB (at a boundary file) or the next file would not fit.
    const packOf = (path: string) => entry(path).segments[0]?.part;
    assert.equal(packOf("crate0/src/m00.rs"), packOf("crate2/src/m39.rs"));
    assert.equal(packOf("crate0/src/m00.rs"), packOf("dense/a.rs"), "a 1 MiB file is still packed");
    const packParts = archive.manifest.parts.filter((p) =>
      archive.manifest.entries.some(
        (e) => e.kind === "file" && e.size <= LARGE_FILE_BYTES && e.segments[0]?.part === p.part,
      ),
    );
    assert.ok(packParts.length >= 2, "4.2 MB of dense files need more than one pack");
    for (const [i, p] of packParts.entries()) {
      assert.ok(p.bytes <= PART_BYTES);
      if (i < packParts.length - 1)
        assert.ok(p.bytes >= PACK_MIN_BYTES || p.bytes + 60_000 > PART_BYTES, `pack ${p.part}`);
    }
    // Totals equal what the manifest implies.
    assert.equal(archive.totals.entries, archive.manifest.entries.length);
    assert.equal(archive.totals.parts, archive.manifest.parts.length);
    assert.equal(archive.totals.metadata_bytes, canonicalManifest(archive.manifest.entries).length);
    assert.equal(archive.totals.directories, 8); // crate0..2, crate0..2/src, assets, dense
    assert.deepEqual(
      archive.manifest.parts.map((p) => p.part),
      archive.manifest.parts.map((_, i) => i + 1),
    );
  });

  it("keeps parts' bytes from hashing for sending; without them a part is read from the workspace", () => {
    const root = workspace();
    const archive = buildArchive(captureWorkspace(root, { git: false }));
    assert.ok(archive.sources.every((s) => s.content !== undefined && s.content.length === s.bytes));
    for (const source of archive.sources) {
      const { content, ...fromDisk } = source;
      assert.ok(readPart(fromDisk).equals(content as Buffer), `part ${source.part}`);
    }
  });

  it("is deterministic: the same tree gives the same manifest, layout and upload id", () => {
    const root = workspace();
    const a = buildArchive(captureWorkspace(root, { git: false }));
    const b = buildArchive(captureWorkspace(root, { git: false }));
    assert.deepEqual(a.manifest, b.manifest);
    assert.equal(a.manifestSha256, b.manifestSha256);
    assert.equal(uploadIdOf("acme/widget", a, 0), uploadIdOf("acme/widget", b, 0));
    assert.match(uploadIdOf("acme/widget", a, 0), new RegExp(UPLOAD_ID_PATTERN));
    assert.notEqual(uploadIdOf("acme/widget", a, 0), uploadIdOf("acme/widget", a, 1));
    assert.notEqual(uploadIdOf("acme/widget", a, 0), uploadIdOf("acme/other", a, 0));
  });

  it("a one-file edit changes only the part(s) holding that file", () => {
    const root = workspace();
    const before = buildArchive(captureWorkspace(root, { git: false }));
    const digests = (a: Archive) => new Set(a.manifest.parts.map((p) => p.sha256));
    const changed = (a: Archive, b: Archive) => [...digests(b)].filter((d) => !digests(a).has(d));

    appendFileSync(join(root, "crate1/src/m07.rs"), "// edited\n");
    const small = buildArchive(captureWorkspace(root, { git: false }));
    const newSmall = changed(before, small);
    assert.equal(newSmall.length, 1, "one pack changed");
    const pack = small.manifest.parts.find((p) => p.sha256 === newSmall[0]);
    const holder = small.manifest.entries.find((e) => e.path === "crate1/src/m07.rs");
    assert.ok(holder?.kind === "file" && holder.segments[0]?.part === pack?.part);
    assert.notEqual(small.manifestSha256, before.manifestSha256);

    const big = join(root, "assets/big.bin");
    const fd = openSync(big, "r+");
    writeSync(fd, Buffer.from("edit"), 0, 4, PART_BYTES + 10);
    closeSync(fd);
    const large = buildArchive(captureWorkspace(root, { git: false }));
    const newLarge = changed(small, large);
    assert.ok(newLarge.length <= 1, "only the edited 4 MiB piece of the large file changed");
    const sent = large.manifest.parts.filter((p) => newLarge.includes(p.sha256)).reduce((s, p) => s + p.bytes, 0);
    assert.ok(sent <= PART_BYTES);
  });
});

describe("archive layout reusing the previous upload's packs", () => {
  const tree60 = () => {
    const files: Record<string, string | Buffer> = { "Cargo.toml": "[package]\n" };
    for (let f = 0; f < 60; f++) files[`src/f${String(f).padStart(2, "0")}.rs`] = randomBytes(40_000);
    return tree(files);
  };
  const partsOf = (a: Archive) => new Map(a.sources.map((s) => [s.sha256, readPart(s)]));

  it("points unchanged files into the old packs and packs only the edited one; the bytes still reassemble", () => {
    const root = tree60();
    const before = buildArchive(captureWorkspace(root, { git: false }));
    assert.ok(before.packs.packs.length >= 2, "2.4 MB of small files make several packs");
    const held = partsOf(before);
    appendFileSync(join(root, "src/f07.rs"), "// edited\n");
    const after = buildArchive(captureWorkspace(root, { git: false }), before.packs);
    const fresh = after.manifest.parts.filter((p) => !held.has(p.sha256));
    assert.equal(fresh.length, 1, "one new pack");
    assert.equal(fresh[0]?.bytes, 40_000 + 10, "holding the edited file only");
    assert.equal(after.reusedPacks, before.packs.packs.length);
    // The old pack that held f07.rs cannot be rebuilt from the tree; the others can.
    const stale = after.sources.filter((s) => !s.reproducible);
    assert.equal(stale.length, 1);
    assert.throws(() => readPart(stale[0] as (typeof stale)[number]), /no longer in the tree/);
    // Reassembled from the parts the service holds plus the new one, every file is exact.
    for (const e of after.manifest.entries) {
      if (e.kind !== "file") continue;
      const content = Buffer.concat(
        e.segments.map((seg) => {
          const part = after.manifest.parts[seg.part - 1];
          const source = after.sources[seg.part - 1];
          const bytes = held.get(part?.sha256 ?? "") ?? (source === undefined ? Buffer.alloc(0) : readPart(source));
          return bytes.subarray(seg.offset, seg.offset + seg.length);
        }),
      );
      assert.equal(sha256(content), e.sha256, e.path);
    }
    // Its packs (live files only) are what the next run reuses.
    const kept = after.packs.packs.find((p) => p.sha256 === stale[0]?.sha256);
    assert.equal(
      kept?.files.length,
      (before.packs.packs.find((p) => p.sha256 === stale[0]?.sha256)?.files.length ?? 0) - 1,
    );
  });

  it("lays out afresh once more than a quarter of the reused packs' bytes would be dead", () => {
    const root = tree60();
    const before = buildArchive(captureWorkspace(root, { git: false }));
    for (let f = 0; f < 30; f++) appendFileSync(join(root, `src/f${String(f).padStart(2, "0")}.rs`), "// edited\n");
    const capture = captureWorkspace(root, { git: false });
    const after = buildArchive(capture, before.packs);
    assert.equal(after.reusedPacks, 0);
    assert.equal(after.layoutSha256, buildArchive(capture).layoutSha256, "exactly the fresh layout");
    assert.ok(after.sources.every((s) => s.reproducible));
  });

  it("packs the files of more than 16 small packs left by earlier edits together again", () => {
    const files: Record<string, string | Buffer> = {};
    for (let f = 0; f < 30; f++) files[`src/f${String(f).padStart(2, "0")}.rs`] = randomBytes(40_000);
    for (let t = 0; t < 20; t++) files[`tiny/t${String(t).padStart(2, "0")}.rs`] = randomBytes(100);
    const root = tree(files);
    const capture = captureWorkspace(root, { git: false });
    const before = buildArchive(capture);
    // As if each tiny file had been edited in a run of its own: one pack each.
    const tinyPacks = (n: number) =>
      capture.entries.slice(30, 30 + n).map((e) => {
        const bytes = readFileSync(e.absolute);
        return {
          sha256: sha256(bytes),
          bytes: bytes.length,
          files: [{ sha256: sha256(bytes), size: bytes.length, offset: 0 }],
        };
      });
    const digests = (a: Archive) => new Set(a.manifest.parts.map((p) => p.sha256));
    const many = buildArchive(capture, { packs: [...before.packs.packs, ...tinyPacks(20)] });
    assert.ok(
      tinyPacks(20).every((p) => !digests(many).has(p.sha256)),
      "none of the 20 small packs is reused; their files are packed again",
    );
    // 15 more small packs beside the fresh layout's own small last one: 16, still reused.
    assert.ok((before.packs.packs.at(-1)?.bytes ?? 0) < PACK_MIN_BYTES);
    const few = buildArchive(capture, { packs: [...before.packs.packs, ...tinyPacks(15)] });
    assert.ok(
      tinyPacks(15).every((p) => digests(few).has(p.sha256)),
      "16 small packs are still reused",
    );
  });

  it("identical small files share one segment", () => {
    const same = randomBytes(5000);
    const root = tree({ "a/x.rs": same, "b/y.rs": same, "c/z.rs": randomBytes(10) });
    const archive = buildArchive(captureWorkspace(root, { git: false }));
    const [x, y] = archive.manifest.entries;
    assert.ok(x?.kind === "file" && y?.kind === "file");
    assert.deepEqual(x.segments, y.segments);
    assert.equal(archive.totals.part_bytes, 5010);
    assert.equal(reassemble(archive).get("b/y.rs")?.equals(same), true);
  });
});

describe("workspace discovery", () => {
  it("finds the [workspace] root above a member, else the nearest Cargo.toml; parses remotes", () => {
    const root = tree({
      "Cargo.toml": "[workspace]\nmembers = ['m']\n",
      "m/Cargo.toml": "[package]\nname = 'm'\n",
      "m/src/lib.rs": "",
    });
    assert.equal(findWorkspaceRoot(join(root, "m/src")), root);
    assert.equal(workingDirectory(root, join(root, "m")), "m");
    assert.equal(workingDirectory(root, root), ".");
    const lone = tree({ "Cargo.toml": "[package]\nname = 'x'\n", "src/main.rs": "" });
    assert.equal(findWorkspaceRoot(join(lone, "src")), lone);
    assert.equal(repositoryFromRemote("git@github.com:acme/widget.git"), "acme/widget");
    assert.equal(repositoryFromRemote("https://github.com/acme/widget"), "acme/widget");
    assert.equal(repositoryFromRemote("ssh://git@host:22/acme/widget.git/"), "acme/widget");
  });
});

describe("capture errors", () => {
  it("absolute symlinks are refused", () => {
    const root = tree({ "Cargo.toml": "" });
    symlinkSync("/etc/hostname", join(root, "abs"));
    assert.throws(() => captureWorkspace(root, { git: false }), /points outside the workspace/);
  });
});
