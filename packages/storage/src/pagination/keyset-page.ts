import { type SelectQueryBuilder, sql } from "kysely";
import { InvalidCursorError } from "../errors.js";

/**
 * Keyset ("seek") pagination: a page starts strictly after the sort key of the previous page's
 * last row, rather than at an offset. Rows inserted or deleted elsewhere while a client pages
 * through therefore never shift a row onto two pages or off all of them.
 *
 * The cursor is opaque to clients: base64url of a small JSON array holding that last row's
 * sort-key values. It is not signed — a client that forges one can only page its own data
 * from a different point — but it is validated, so a damaged one is refused as `cursor`
 * instead of reaching SQL.
 */

export type SortDirection = "asc" | "desc";

/** What a cursor value must be: `text` (a string) or `integer` (a safe integer). */
export type CursorValueKind = "text" | "integer";

export type CursorValue = string | number;

/**
 * One sort key: a column that is both selected (its value is read from each row) and
 * referable by that name in the query, its direction, and optionally its kind, which
 * `decodeCursor` then enforces (without one, a string or safe integer is accepted).
 * The last column must be unique so the order is total; sort columns must be NOT NULL.
 */
export type KeysetSortColumn<Row> = readonly [
  column: keyof Row & string,
  direction: SortDirection,
  kind?: CursorValueKind,
];

export interface KeysetPageOptions<Row> {
  /** Sort keys, most significant first, e.g. `[["changed_at", "desc"], ["sequence", "desc"]]`. */
  sort: readonly KeysetSortColumn<Row>[];
  /** Page size, at least 1. */
  limit: number;
  /** The previous page's `nextCursor`; absent, null or empty for the first page. */
  cursor?: string | null | undefined;
}

export interface KeysetPage<Row> {
  rows: Row[];
  /** Null on the last page. */
  nextCursor: string | null;
}

/**
 * Orders `query` by the sort keys, resumes after `cursor`, and reads `limit + 1` rows: the extra
 * row only tells whether another page exists, so the last page says so without an empty
 * follow-up request. `query` must not carry its own ORDER BY or LIMIT.
 */
export async function fetchKeysetPage<DB, TB extends keyof DB, Row>(
  query: SelectQueryBuilder<DB, TB, Row>,
  options: KeysetPageOptions<Row>,
): Promise<KeysetPage<Row>> {
  const { sort, limit, cursor } = options;
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`page limit must be a positive integer, got ${limit}`);
  }
  if (sort.length === 0) {
    throw new RangeError("keyset pagination needs at least one sort column");
  }

  let paged = query;
  if (cursor) {
    const after = decodeCursor(
      cursor,
      sort.map(([, , kind]) => kind),
    );
    paged = paged.where(afterKey(sort, after));
  }
  for (const [column, direction] of sort) {
    paged = paged.orderBy(sql.ref(column), direction);
  }
  const rows = await paged.limit(limit + 1).execute();

  if (rows.length <= limit) {
    return { rows, nextCursor: null };
  }
  rows.length = limit;
  const last = rows[limit - 1];
  if (last === undefined) {
    throw new Error("unreachable: a full page has a last row");
  }
  return { rows, nextCursor: encodeCursor(sort.map(([column]) => cursorValueOf(last, column))) };
}

export function encodeCursor(values: readonly CursorValue[]): string {
  return Buffer.from(JSON.stringify(values), "utf8").toString("base64url");
}

/**
 * Decodes a cursor made by `encodeCursor` for the given sort keys (one expected kind per key,
 * `undefined` for "string or safe integer"). Anything else throws `InvalidCursorError`.
 */
export function decodeCursor(cursor: string, kinds: readonly (CursorValueKind | undefined)[]): CursorValue[] {
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) {
    throw new InvalidCursorError("not a cursor issued by this service");
  }
  const bytes = Buffer.from(cursor, "base64url");
  // Node's decoder skips stray characters and padding; a cursor we issued round-trips exactly.
  if (bytes.toString("base64url") !== cursor) {
    throw new InvalidCursorError("not a cursor issued by this service");
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw new InvalidCursorError("not a cursor issued by this service");
  }
  if (!Array.isArray(parsed) || parsed.length !== kinds.length) {
    throw new InvalidCursorError("it does not belong to this list");
  }
  return parsed.map((value: unknown, index) => {
    if (!isCursorValue(value, kinds[index])) {
      throw new InvalidCursorError("it does not belong to this list");
    }
    return value;
  });
}

const MAX_CURSOR_LENGTH = 1024;

function isCursorValue(value: unknown, kind: CursorValueKind | undefined): value is CursorValue {
  const isText = typeof value === "string";
  const isInteger = typeof value === "number" && Number.isSafeInteger(value);
  if (kind === "text") return isText;
  if (kind === "integer") return isInteger;
  return isText || isInteger;
}

/**
 * "Strictly after `values` in this order", spelled out so mixed directions work:
 * (a ⋚ va) OR (a = va AND b ⋚ vb) OR … — where ⋚ is `<` for a descending key, `>` ascending.
 * Row-value comparison `(a, b) < (va, vb)` would be shorter but cannot mix directions.
 */
function afterKey<Row>(sort: readonly KeysetSortColumn<Row>[], values: readonly CursorValue[]) {
  const alternatives = sort.map(([column, direction], index) => {
    const equalPrefix = sort.slice(0, index).map(([previous], j) => sql`${sql.ref(previous)} = ${values[j]}`);
    const beyond = sql`${sql.ref(column)} ${sql.raw(direction === "desc" ? "<" : ">")} ${values[index]}`;
    return sql`(${sql.join([...equalPrefix, beyond], sql` and `)})`;
  });
  return sql<boolean>`(${sql.join(alternatives, sql` or `)})`;
}

function cursorValueOf<Row>(row: Row, column: keyof Row & string): CursorValue {
  const value: unknown = row[column];
  if (typeof value === "string" || (typeof value === "number" && Number.isSafeInteger(value))) {
    return value;
  }
  throw new TypeError(`sort column ${column} must be selected and hold a string or an integer`);
}
