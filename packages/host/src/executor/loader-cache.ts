import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Host directories whose software the sandbox does not show (locally installed, not the system's). */
export const HIDDEN_SYSTEM_DIRECTORIES = ["/usr/local"];

const hidden = (path: string) => HIDDEN_SYSTEM_DIRECTORIES.some((dir) => path === dir || path.startsWith(`${dir}/`));

/**
 * Writes the loader cache the sandbox is given (at `path`, replaced atomically): the host's own,
 * rebuilt from the directories it covers less the hidden ones, since the host's
 * /etc/ld.so.cache names every library under /usr/local by path. `ldconfig -X` creates no link
 * on the host; `-C` writes only the given file. Returns the path, or null when the host has no
 * loader cache to start from (the sandbox then gets none, as before, and the loader searches its
 * default directories).
 */
export async function writeSandboxLoaderCache(ldconfig: string, path: string): Promise<string | null> {
  let listing: string;
  try {
    listing = (await run(ldconfig, ["-p"])).stdout;
  } catch {
    return null;
  }
  const directories = new Set<string>();
  for (const line of listing.split("\n")) {
    const library = /=> (\/\S+)$/.exec(line)?.[1];
    if (library !== undefined && !hidden(library)) directories.add(dirname(library));
  }
  const unique = `${path}.${process.pid}.${randomBytes(4).toString("hex")}`;
  try {
    await writeFile(`${unique}.conf`, [...directories].map((d) => `${d}\n`).join(""), { mode: 0o644 });
    await run(ldconfig, ["-X", "-C", unique, "-f", `${unique}.conf`]);
    await rename(unique, path);
    return path;
  } finally {
    await rm(`${unique}.conf`, { force: true });
    await rm(unique, { force: true });
  }
}
