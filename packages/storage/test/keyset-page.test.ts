import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  type AuditEntry,
  appendAuditEntry,
  createTenant,
  type Database,
  decodeCursor,
  encodeCursor,
  fetchKeysetPage,
  InvalidCursorError,
  type KeysetPage,
  listAuditEntries,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

const T0 = Date.parse("2026-11-22T07:10:13.123Z");
const clockAt = (milliseconds: number) => ({ now: () => new Date(T0 + milliseconds) });

function isInvalidCursor(error: unknown): boolean {
  return error instanceof InvalidCursorError && error.field === "cursor";
}

describe("cursor encoding", () => {
  it("round-trips the sort-key tuple", () => {
    const cursor = encodeCursor(["2026-11-22T07:10:13.123Z", 42]);
    assert.match(cursor, /^[A-Za-z0-9_-]+$/);
    assert.deepEqual(decodeCursor(cursor, ["text", "integer"]), ["2026-11-22T07:10:13.123Z", 42]);
  });

  it("refuses anything it did not issue, naming the cursor", () => {
    const base64url = (text: string) => Buffer.from(text).toString("base64url");
    const malformed = [
      "",
      "not a cursor!",
      `${encodeCursor(["a", 1])}=`, // padding is never issued
      base64url("not json"),
      base64url('{"a":1}'),
      base64url('["a"]'), // wrong arity
      base64url('["a",1,2]'),
      base64url("[1,1]"), // wrong kind
      base64url('["a","1"]'),
      base64url('["a",1.5]'),
      base64url('["a",null]'),
      base64url(`["a",${Number.MAX_SAFE_INTEGER + 2}]`),
      "A".repeat(5000),
    ];
    for (const cursor of malformed) {
      assert.throws(() => decodeCursor(cursor, ["text", "integer"]), isInvalidCursor, JSON.stringify(cursor));
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`keyset pages [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    before(async () => {
      storage = await dialect.openFresh();
    });
    after(async () => {
      await storage?.close();
    });

    async function append(tenantId: string, value: string, milliseconds: number): Promise<AuditEntry> {
      return appendAuditEntry(
        storage,
        { tenantId, actor: "usr_test", target: "t", value },
        clockAt(milliseconds).now(),
      );
    }

    it("walks every entry once, newest first, while newer and older entries are inserted between pages", async () => {
      // Pairs of entries share a timestamp, so page boundaries fall inside ties.
      const original: AuditEntry[] = [];
      for (let i = 0; i < 25; i++) {
        original.push(await append("walk", `original-${i}`, Math.floor(i / 2) * 1000));
      }

      const seen: AuditEntry[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await listAuditEntries(storage, { tenantId: "walk", limit: 7, cursor });
        seen.push(...page.entries);
        cursor = page.nextCursor;
        pages++;
        // Concurrent writers: one entry newer than everything, one at a time already paged past.
        await append("walk", `newer-${pages}`, 1_000_000 + pages);
        await append("walk", `in-the-past-${pages}`, 0);
      } while (cursor !== null);

      const originalValues = new Set(original.map((entry) => entry.value));
      const seenOriginals = seen.filter((entry) => originalValues.has(entry.value)).map((entry) => entry.value);
      assert.deepEqual(
        seenOriginals,
        [...original].reverse().map((entry) => entry.value),
        "each original entry exactly once, newest first",
      );
      assert.equal(pages, 4);
      for (let i = 1; i < seen.length; i++) {
        const [previous, current] = [seen[i - 1], seen[i]];
        assert.ok(previous && current);
        assert.ok(
          previous.changedAt > current.changedAt ||
            (previous.changedAt === current.changedAt && previous.sequence > current.sequence),
          "strictly newest first",
        );
      }
    });

    it("a page that ends exactly at the last entry has no next cursor", async () => {
      for (let i = 0; i < 4; i++) await append("exact", `e${i}`, i);
      const first = await listAuditEntries(storage, { tenantId: "exact", limit: 2 });
      assert.ok(first.nextCursor);
      const second = await listAuditEntries(storage, { tenantId: "exact", limit: 2, cursor: first.nextCursor });
      assert.deepEqual(
        second.entries.map((entry) => entry.value),
        ["e1", "e0"],
      );
      assert.equal(second.nextCursor, null);
      assert.deepEqual(await listAuditEntries(storage, { tenantId: "nobody", limit: 2 }), {
        entries: [],
        nextCursor: null,
      });
    });

    it("refuses a malformed cursor or one from a different list", async () => {
      await assert.rejects(listAuditEntries(storage, { tenantId: "walk", limit: 5, cursor: "%%%" }), isInvalidCursor);
      await assert.rejects(
        listAuditEntries(storage, { tenantId: "walk", limit: 5, cursor: encodeCursor(["acme", "owner/name"]) }),
        isInvalidCursor,
      );
    });

    it("supports ascending and mixed-direction sort keys", async () => {
      await createTenant(storage, { id: "mixed" }, new Date());
      const names = ["b/1", "a/1", "c/1", "a/2", "b/2"];
      for (const [index, name] of names.entries()) {
        await storage.db
          .insertInto("repositories")
          .values({
            tenant_id: "mixed",
            name,
            onboarded_at: new Date(T0 + (index < 3 ? 0 : 1000)).toISOString(),
            onboarded_by: "usr_test",
          })
          .execute();
      }
      const collected: string[] = [];
      const query = storage.db.selectFrom("repositories").selectAll().where("tenant_id", "=", "mixed");
      let cursor: string | null = null;
      do {
        const page: KeysetPage<Database["repositories"]> = await fetchKeysetPage(query, {
          sort: [
            ["onboarded_at", "asc", "text"],
            ["name", "desc", "text"],
          ],
          limit: 2,
          cursor,
        });
        collected.push(...page.rows.map((row) => row.name));
        cursor = page.nextCursor;
      } while (cursor !== null);
      assert.deepEqual(collected, ["c/1", "b/1", "a/1", "b/2", "a/2"]);
    });
  });
}
