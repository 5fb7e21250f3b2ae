/**
 * limit (validated 1–1000 and defaulted by the schema) and cursor of a list query.
 * A cursor storage cannot decode throws InvalidCursorError, which the error
 * boundary answers invalid_request naming query.cursor.
 */
export function pageRequestOf(query: Record<string, unknown>): { limit: number; cursor: string | null } {
  const limit = typeof query.limit === "number" ? query.limit : 200;
  const cursor = typeof query.cursor === "string" ? query.cursor : null;
  return { limit, cursor };
}
