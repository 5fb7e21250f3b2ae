// Where kiln's built packages are, and the check every bench makes before importing them: the
// benches import the build (dist), not the TypeScript sources.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (this file is in bench/support/). */
export const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** A built file of packages/server: `src/…` or `test/…` under its dist. */
export const dist = (path) => join(root, "packages", "server", "dist", path);

/** Exits with the hint to build unless every one of `files` exists. */
export function requireBuilt(...files) {
  if (files.every((file) => existsSync(file))) return;
  process.stderr.write("bench: build first: npm run build\n");
  process.exit(1);
}
