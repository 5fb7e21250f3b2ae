import { type ObjectOptions, type TObject, type TProperties, type TSchema, Type } from "@sinclair/typebox";

/**
 * Records are named by `title`: the OpenAPI generator hoists every subschema that
 * carries a title into `components.schemas` under that name, so only records get one.
 */

/** A closed record: members beyond those listed are refused. */
export function Closed<T extends TProperties>(
  title: string,
  properties: T,
  options: Omit<ObjectOptions, "title" | "additionalProperties"> = {},
): TObject<T> {
  return Type.Object(properties, { ...options, title, additionalProperties: false });
}

/** An open record: may carry more members than those listed. */
export function Open<T extends TProperties>(
  title: string,
  properties: T,
  options: Omit<ObjectOptions, "title" | "additionalProperties"> = {},
): TObject<T> {
  return Type.Object(properties, { ...options, title, additionalProperties: true });
}

export const Nullable = <T extends TSchema>(schema: T, description?: string) =>
  Type.Union([schema, Type.Null()], description === undefined ? {} : { description });

export const Timestamp = (description = "RFC 3339 timestamp.") => Type.String({ format: "date-time", description });

/** `owner/name` of a source-hosting repository. */
export const REPOSITORY_PATTERN = "^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$";
export const RepositoryName = (description = "Repository as `owner/name`.") =>
  Type.String({ pattern: REPOSITORY_PATTERN, description });

export const Cursor = () =>
  Type.String({ minLength: 1, maxLength: 512, description: "Opaque cursor from a previous page's next_cursor." });

/** `next_cursor`: opaque string, null on the last page. */
export const NextCursor = () => Nullable(Type.String(), "Opaque cursor of the next page; null on the last page.");

/** Query of every list: cursor and limit 1–1000 (default 200). */
export const PageQuery = (defaultLimit = 200) => ({
  cursor: Type.Optional(Cursor()),
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: defaultLimit,
      description: `Page size, 1 to 1000 (default ${defaultLimit}).`,
    }),
  ),
});
