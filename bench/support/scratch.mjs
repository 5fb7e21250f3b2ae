// Scratch directories of a bench run, removed together when the bench is done with them.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made = [];

/** A fresh directory under the system's tmpdir, named `<prefix>XXXXXX`; removeScratch() removes it. */
export function temp(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every directory temp() has made so far. */
export function removeScratch() {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
