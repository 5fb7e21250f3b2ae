/**
 * limit (validated 1–1000 and defaulted by the schema) and cursor of a list query.
 * A cursor storage cannot decode throws InvalidCursorError, which the error
 * boundary answers invalid_request naming query.cursor.
 */
export function pageRequestOf(query: { readonly limit?: number; readonly cursor?: string }): {
  limit: number;
  cursor: string | null;
} {
  return { limit: query.limit ?? 200, cursor: query.cursor ?? null };
}
