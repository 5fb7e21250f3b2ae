import assert from "node:assert/strict";
import { Migrator } from "kysely";
import type { Storage } from "../src/index.js";
import { migrationProviderFor, migrationsFor } from "../src/migrations/migrations.js";

/**
 * Migrates a database down to the schema just before migration `name`, for a test of what that
 * migration does to the rows of its time. Resolves with a function that migrates it there again
 * (after migrating up, to test the way down).
 */
export async function migrateToBefore(storage: Storage, name: string): Promise<() => Promise<void>> {
  const migrator = new Migrator({ db: storage.db, provider: migrationProviderFor(storage.dialect) });
  const names = Object.keys(migrationsFor(storage.dialect)).sort();
  const before = names[names.indexOf(name) - 1];
  assert.ok(before !== undefined, `no migration before ${name}`);
  const again = async () => {
    const down = await migrator.migrateTo(before);
    assert.equal(down.error, undefined, String(down.error));
  };
  await again();
  return again;
}
