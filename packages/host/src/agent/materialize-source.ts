/**
 * Writes the job's exact source bytes into the attempt's workspace. Files are fetched and
 * written a few at a time: each is a blob read, a write and a chmod, and done one after
 * another their latencies add up to tens of milliseconds for a crate of a few dozen files —
 * a visible share of a warm run, where cargo itself has almost nothing to do. Symlinks (from
 * a streamed archive) are created as links, never followed. A streamed archive's files are
 * slices of its parts: each part is fetched once while the files that need it are written
 * (files are in path order and packs hold neighbours, so a small cache of parts suffices).
 */
import { chmod, mkdir, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { SourceEntry, SourceSegment } from "./host-protocol.js";

const CONCURRENT_FILES = 16;

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
  const worker = async () => {
    for (let entry = source[next++]; entry !== undefined; entry = source[next++]) {
      const path = join(workspaceDir, entry.path);
      if (entry.kind === "symlink") {
        // Targets were checked at reservation to resolve inside the tree; created verbatim.
        await symlink(entry.target ?? "", path);
        continue;
      }
      const content = entry.segments === undefined ? await fetchBlob(entry.sha256) : await parts.join(entry.segments);
      await writeFile(path, content);
      await chmod(path, entry.executable ? 0o755 : 0o644);
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
