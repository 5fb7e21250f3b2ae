import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { openApiDocumentText } from "./web/http/openapi-document.js";

/**
 * Generated files committed to the repository, each checked for drift by a test.
 * The committed document carries the version `committed` so that it changes only
 * when the catalogue does.
 */
export const committedOpenApiPath = fileURLToPath(new URL("../../../../docs/openapi.json", import.meta.url));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(committedOpenApiPath, openApiDocumentText("committed"));
  process.stdout.write(`wrote ${committedOpenApiPath}\n`);
}
