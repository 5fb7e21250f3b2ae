import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sql } from "kysely";
import {
  appendAuditEntry,
  appendOperatorAuditEntry,
  listAuditEntries,
  listOperatorAuditEntries,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const clock = { now: () => new Date("2026-11-22T07:10:13.123Z") };
const APPEND_ONLY = /audit entries are append-only/;

for (const dialect of DIALECTS) {
  describe(`audit log [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    before(async () => {
      storage = await dialect.openFresh();
    });
    after(async () => {
      await storage?.close();
    });

    it("appends entries with increasing sequence and lists each tenant's newest first", async () => {
      const first = await appendAuditEntry(
        storage,
        { tenantId: "acme", actor: "usr_1", target: "credential:ci-bot", value: "created" },
        clock.now(),
      );
      assert.deepEqual(
        { ...first, sequence: 0 },
        {
          sequence: 0,
          actor: "usr_1",
          target: "credential:ci-bot",
          value: "created",
          changedAt: "2026-11-22T07:10:13.123Z",
          effective: "2026-11-22T07:10:13.123Z",
        },
      );
      const second = await appendAuditEntry(
        storage,
        { tenantId: "acme", actor: "agent:ci", target: "setting:x", value: "2", effective: "next job" },
        clock.now(),
      );
      await appendAuditEntry(storage, { tenantId: "globex", actor: "usr_2", target: "t", value: "v" }, clock.now());
      assert.ok(second.sequence > first.sequence);

      const page = await listAuditEntries(storage, { tenantId: "acme", limit: 10 });
      assert.deepEqual(page.entries, [second, first]);
      assert.equal(page.nextCursor, null);
    });

    it("an entry appended in a transaction that rolls back is not kept", async () => {
      await assert.rejects(
        storage.transaction(async (trx) => {
          await appendAuditEntry(trx, { tenantId: "rollback", actor: "a", target: "t", value: "v" }, clock.now());
          throw new Error("change failed");
        }),
        /change failed/,
      );
      assert.deepEqual((await listAuditEntries(storage, { tenantId: "rollback", limit: 10 })).entries, []);
    });

    for (const table of ["audit_entries", "operator_audit_entries"] as const) {
      it(`the database refuses UPDATE and DELETE on ${table}`, async () => {
        await appendOperatorAuditEntry(
          storage,
          { actor: "operator", target: "host:h1", value: "drained" },
          clock.now(),
        );
        const before = await sql`select * from ${sql.table(table)} order by sequence`.execute(storage.db);
        assert.ok(before.rows.length > 0);

        await assert.rejects(sql`update ${sql.table(table)} set value = 'rewritten'`.execute(storage.db), APPEND_ONLY);
        await assert.rejects(sql`delete from ${sql.table(table)}`.execute(storage.db), APPEND_ONLY);
        if (dialect.name === "postgres") {
          await assert.rejects(sql`truncate ${sql.table(table)}`.execute(storage.db), APPEND_ONLY);
        } else {
          // REPLACE deletes the conflicting row without firing the delete trigger (migration 0014).
          await assert.rejects(
            sql`insert or replace into ${sql.table(table)} select * from ${sql.table(table)} order by sequence limit 1`.execute(
              storage.db,
            ),
            APPEND_ONLY,
          );
        }
        const afterwards = await sql`select * from ${sql.table(table)} order by sequence`.execute(storage.db);
        assert.deepEqual(afterwards.rows, before.rows);
      });
    }

    it("keeps a separate operator log, newest first", async () => {
      const entry = await appendOperatorAuditEntry(
        storage,
        {
          actor: "operator",
          target: "tenant:acme",
          value: "suspended",
          changedAt: new Date("2030-01-01T00:00:00.000Z"),
        },
        clock.now(),
      );
      const page = await listOperatorAuditEntries(storage, { limit: 1 });
      assert.deepEqual(page.entries, [entry]);
      assert.ok(page.nextCursor);
      const next = await listOperatorAuditEntries(storage, { limit: 100, cursor: page.nextCursor });
      assert.ok(next.entries.every((other) => other.sequence !== entry.sequence));
    });
  });
}
