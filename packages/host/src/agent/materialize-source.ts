/**
 * Writes the job's exact source bytes into the attempt's workspace. Files are fetched and
 * written a few at a time: each is a blob read, a write and a chmod, and done one after
 * another their latencies add up to tens of milliseconds for a crate of a few dozen files —
 * a visible share of a warm run, where cargo itself has almost nothing to do. Symlinks (from
 * a streamed archive) are created as links, never followed.
 */
import { chmod, mkdir, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { SourceEntry } from "./host-protocol.js";

const CONCURRENT_FILES = 16;

export async function materializeSource(
  workspaceDir: string,
  source: readonly SourceEntry[],
  fetchBlob: (sha256: string) => Promise<Buffer>,
): Promise<void> {
  // Directories first, each once, so that concurrent writes never race to create them.
  const directories = new Set(source.map((entry) => dirname(join(workspaceDir, entry.path))));
  for (const directory of [...directories].sort()) await mkdir(directory, { recursive: true });
  let next = 0;
  const worker = async () => {
    for (let entry = source[next++]; entry !== undefined; entry = source[next++]) {
      const path = join(workspaceDir, entry.path);
      if (entry.kind === "symlink") {
        // Targets were checked at reservation to resolve inside the tree; created verbatim.
        await symlink(entry.target ?? "", path);
        continue;
      }
      await writeFile(path, await fetchBlob(entry.sha256));
      await chmod(path, entry.executable ? 0o755 : 0o644);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENT_FILES, source.length) }, worker));
}
