import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { sql } from "kysely";
import { openStorage } from "../src/index.js";
import { SQLITE_FILE_NAME } from "../src/sqlite/open-sqlite-storage.js";

/** Resolves once `condition` holds (it is the checkpointer thread's work, on its own schedule). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe("SQLite WAL checkpoints off the event loop (sqlite only: PostgreSQL has no WAL of this kind)", () => {
  it("the committing connection never checkpoints; the thread moves committed pages into the database file", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-wal-"));
    const failures: Error[] = [];
    const storage = await openStorage({ dataDir, walCheckpointsOffLoop: { onFailure: (e) => failures.push(e) } });
    try {
      const file = join(dataDir, SQLITE_FILE_NAME);
      const autocheckpoint = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(storage.db);
      assert.equal(
        autocheckpoint.rows[0]?.wal_autocheckpoint,
        0,
        "the event loop's connection leaves checkpoints to the thread",
      );
      const before = statSync(file).size;
      // 8 MB committed: twice SQLite's automatic threshold, as one large upload manifest is.
      await sql`create table wal_probe (id integer primary key, body text not null)`.execute(storage.db);
      await storage.transaction(async (trx) => {
        await sql`insert into wal_probe (body) values (${"m".repeat(8_000_000)})`.execute(trx);
      });
      await until(() => statSync(file).size >= before + 8_000_000);
      const rows = await sql<{ n: number }>`select length(body) as n from wal_probe`.execute(storage.db);
      assert.equal(rows.rows[0]?.n, 8_000_000);
      assert.deepEqual(failures, []);
    } finally {
      await storage.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("without the option SQLite checkpoints at commit, as by default", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-wal-"));
    const storage = await openStorage({ dataDir });
    try {
      const autocheckpoint = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(storage.db);
      assert.equal(autocheckpoint.rows[0]?.wal_autocheckpoint, 1000);
    } finally {
      await storage.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
