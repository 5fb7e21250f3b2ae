/**
 * Writes the job's exact source bytes into the attempt's workspace. Files are fetched a few at
 * a time (a remote host's fetch is a network round trip). A small file is written with
 * synchronous calls: as promises, its open, write, close and chmod were four thread-pool
 * round trips, and for a crate of a few dozen files those added up to 20–30 ms of a warm run
 * where cargo itself has almost nothing to do. So that a large tree cannot hold the event loop,
 * the writers yield to it every few milliseconds. Symlinks (from
 * a streamed archive) are created as links, never followed. A streamed archive's files are
 * slices of its parts: each part is fetched once while the files that need it are written
 * (files are in path order and packs hold neighbours, so a small cache of parts suffices).
 */
import { chmodSync, writeFileSync } from "node:fs";
import { chmod, mkdir, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { SourceEntry, SourceSegment } from "./host-protocol.js";

const CONCURRENT_FILES = 16;

/** Files up to this size are written synchronously (see above). */
const SYNCHRONOUS_WRITE_BYTES = 1024 * 1024;

/** Longest stretch of synchronous writing before the event loop gets a turn. */
const YIELD_AFTER_MS = 4;

/** Parts kept while files are written: at most 4 MiB each. */
const CACHED_PARTS = 24;

export async function materializeSource(
  workspaceDir: string,
  source: readonly SourceEntry[],
  fetchBlob: (sha256: string) => Promise<Buffer>,
): Promise<void> {
  // Directories first, each once, so that concurrent writes never race to create them.
  const directories = new Set(source.map((entry) => dirname(join(workspaceDir, entry.path))));
  for (const directory of [...directories].sort()) await mkdir(directory, { recursive: true });
  const parts = new PartCache(fetchBlob);
  let next = 0;
  let slice = performance.now();
  const worker = async () => {
    for (let entry = source[next++]; entry !== undefined; entry = source[next++]) {
      const path = join(workspaceDir, entry.path);
      if (entry.kind === "symlink") {
        // Targets were checked at reservation to resolve inside the tree; created verbatim.
        await symlink(entry.target ?? "", path);
        continue;
      }
      const content = entry.segments === undefined ? await fetchBlob(entry.sha256) : await parts.join(entry.segments);
      const mode = entry.executable ? 0o755 : 0o644;
      if (content.length > SYNCHRONOUS_WRITE_BYTES) {
        await writeFile(path, content);
        await chmod(path, mode);
      } else {
        writeFileSync(path, content);
        chmodSync(path, mode);
        if (performance.now() - slice > YIELD_AFTER_MS) {
          await new Promise((resolve) => setImmediate(resolve));
          slice = performance.now();
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENT_FILES, source.length) }, worker));
}

/** Part blobs by digest, each fetched once while in the cache (concurrent askers share the fetch). */
class PartCache {
  private readonly entries = new Map<string, Promise<Buffer>>();

  constructor(private readonly fetchBlob: (sha256: string) => Promise<Buffer>) {}

  async join(segments: readonly SourceSegment[]): Promise<Buffer> {
    const pieces: Buffer[] = [];
    for (const s of segments) pieces.push((await this.part(s.part)).subarray(s.offset, s.offset + s.length));
    return pieces.length === 1 && pieces[0] !== undefined ? pieces[0] : Buffer.concat(pieces);
  }

  private part(digest: string): Promise<Buffer> {
    let entry = this.entries.get(digest);
    if (entry === undefined) {
      entry = this.fetchBlob(digest);
      this.entries.set(digest, entry);
      if (this.entries.size > CACHED_PARTS) {
        const oldest = this.entries.keys().next().value;
        if (oldest !== undefined) this.entries.delete(oldest);
      }
    } else {
      this.entries.delete(digest);
      this.entries.set(digest, entry);
    }
    return entry;
  }
}
