/**
 * Where a crate's index file lives in a registry index (sparse, git or local): cargo's layout
 * `1/a`, `2/ab`, `3/a/abc`, `ab/cd/abcd…`, always lowercase.
 */
export function indexPathOf(name: string): string {
  const lower = name.toLowerCase();
  if (lower.length === 1) return `1/${lower}`;
  if (lower.length === 2) return `2/${lower}`;
  if (lower.length === 3) return `3/${lower.slice(0, 1)}/${lower}`;
  return `${lower.slice(0, 2)}/${lower.slice(2, 4)}/${lower}`;
}

/** A crate name cargo accepts (also what keeps it a single safe path segment). */
export function isCrateName(name: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/.test(name);
}

/** A version as it may appear in a file name: semver characters only. */
export function isCrateVersion(version: string): boolean {
  return /^[0-9A-Za-z.+-]{1,64}$/.test(version) && !version.includes("..");
}
