import { buildOpenApiDocument, CATALOGUE, Refusal } from "@kiln/contract";

let cached: { version: string; text: string } | undefined;

/** The served OpenAPI 3.1 document as JSON text, generated once per version. */
export function openApiDocumentText(version: string): string {
  if (cached?.version !== version) {
    cached = { version, text: `${JSON.stringify(buildOpenApiDocument(CATALOGUE, Refusal, { version }), null, 2)}\n` };
  }
  return cached.text;
}
