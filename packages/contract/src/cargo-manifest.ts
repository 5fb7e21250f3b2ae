/**
 * Reading a parsed Cargo.toml the same way wherever kiln must (admission's network policy, the
 * host's affected packages and dependency gateway): which tables hold dependencies.
 */

type Table = Record<string, unknown>;

const isTable = (value: unknown): value is Table =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The keys of a manifest (or a `[target.<cfg>]` table) that hold dependencies; cargo accepts both spellings. */
export const DEPENDENCY_TABLE_KEYS = [
  "dependencies",
  "dev-dependencies",
  "dev_dependencies",
  "build-dependencies",
  "build_dependencies",
] as const;

/** The dependency tables of a parsed manifest: plain, dev and build, at the top and per target. */
export function dependencyTablesOf(manifest: Table): Table[] {
  const tables: Table[] = [];
  const collect = (owner: Table) => {
    for (const key of DEPENDENCY_TABLE_KEYS) {
      const table = owner[key];
      if (isTable(table)) tables.push(table);
    }
  };
  collect(manifest);
  if (isTable(manifest.target))
    for (const target of Object.values(manifest.target)) if (isTable(target)) collect(target);
  return tables;
}
