import pg from "pg";

const INT8_OID = 20;
const TIMESTAMP_OIDS = new Set([1082 /* date */, 1114 /* timestamp */, 1184 /* timestamptz */]);

/**
 * Per-pool type parsers (not `pg.types.setTypeParser`, which would change every pool in the
 * process, including ones that are not ours).
 *
 * - int8 (`bigint`, identity columns, `count(*)`) arrives as a JS number, like SQLite integers.
 *   pg returns strings by default because int8 can exceed 2^53; our values (sequences, counts,
 *   byte sizes) stay far below, and a value that does not is refused rather than rounded.
 * - Timestamps are text columns here, but anything date-typed that a query computes is
 *   returned as the server's text rather than a JS Date, so no local time zone gets involved.
 */
export const kilnPostgresTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if (oid === INT8_OID) {
      return parseSafeInteger;
    }
    if (TIMESTAMP_OIDS.has(oid)) {
      return (value: string) => value;
    }
    return pg.types.getTypeParser(oid, format ?? "text");
  }) as pg.CustomTypesConfig["getTypeParser"],
};

function parseSafeInteger(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new RangeError(`int8 value ${text} does not fit a JavaScript number`);
  }
  return value;
}
