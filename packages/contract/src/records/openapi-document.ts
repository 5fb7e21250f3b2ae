import { Type } from "@sinclair/typebox";
import { Open } from "../schema-helpers.js";

export const OpenApiDocument = Open(
  "OpenApiDocument",
  {
    openapi: Type.String({ pattern: "^3\\.1\\.[0-9]+$", description: "The OpenAPI version, 3.1.x." }),
    info: Type.Object(
      {
        title: Type.String(),
        version: Type.String({ description: "The service's catalogue version." }),
      },
      { additionalProperties: true, description: "OpenAPI Info object." },
    ),
    paths: Type.Record(Type.String(), Type.Unknown(), {
      description: "OpenAPI Paths object: each path's operations, whose operationId is the catalogue operation id.",
    }),
  },
  {
    description:
      "The served OpenAPI 3.1 document, generated from the same operation catalogue that binds the routes; also carries components, security schemes and tags.",
  },
);
