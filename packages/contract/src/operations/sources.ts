import { Type } from "@sinclair/typebox";
import { defineOperation } from "../operation.js";
import {
  PartNumber,
  Sha256Hex,
  SOURCE_LIMITS,
  SourceCapabilities,
  SourceChunkStatus,
  SourceReservation,
  SourceUpload,
  UploadId,
} from "../records/sources.js";
import { A, K } from "../refusal-codes.js";
import { RepositoryName } from "../schema-helpers.js";

const repositoryQuery = () =>
  Type.Object(
    { repository: RepositoryName("The repository the upload is bound to.") },
    { additionalProperties: false },
  );

const uploadParams = () => Type.Object({ upload: UploadId() }, { additionalProperties: false });

const partParams = () => Type.Object({ upload: UploadId(), part: PartNumber() }, { additionalProperties: false });

/** Sources: the streamed archive transport (spec table Sources). */
export const SOURCES_OPERATIONS = [
  defineOperation({
    id: "sources.capabilities",
    method: "GET",
    path: "/api/source-capabilities",
    summary: "What the streamed archive transport accepts for a repository: chunk size, limits, formats.",
    tag: "sources",
    security: { kind: "tenant", scope: "submit" },
    request: {
      query: Type.Object({ repository: RepositoryName("An onboarded repository.") }, { additionalProperties: false }),
    },
    response: { encoding: "json", schema: SourceCapabilities },
    refusals: [...A, "invalid_request", "not_found"],
    keyed: false,
  }),
  defineOperation({
    id: "sources.reserve",
    method: "POST",
    path: "/api/sources",
    summary: "Reserve a streamed source upload from its manifest; the idempotency-key is the upload id.",
    description:
      "Checks the declared totals against the limits and the tenant's reservations (16 GiB, 32 unclaimed uploads) before any byte is sent. A repeat with the same key and body returns the original upload; a changed body is refused conflict, as is a reservation past the tenant's limits. not_found: the repository is not onboarded for the tenant; gone: the key names an expired upload.",
    tag: "sources",
    security: { kind: "tenant", scope: "submit" },
    request: { body: { encoding: "json", schema: SourceReservation, maxBytes: 256 * 1024 * 1024 } },
    response: { encoding: "json", schema: SourceUpload },
    refusals: [...A, ...K, "invalid_request", "not_found", "gone", "conflict"],
    keyed: true,
    idempotency: "durable-owner",
  }),
  defineOperation({
    id: "sources.status",
    method: "GET",
    path: "/api/sources/{upload}",
    summary: "Read an upload: state, parts held and missing, expiry and admission.",
    tag: "sources",
    security: { kind: "tenant", scope: "submit" },
    request: { params: uploadParams(), query: repositoryQuery() },
    response: { encoding: "json", schema: SourceUpload },
    refusals: [...A, "invalid_request", "not_found"],
    keyed: false,
  }),
  defineOperation({
    id: "sources.chunk.put",
    method: "POST",
    path: "/api/sources/{upload}/chunks/{part}",
    summary: "Send one part's raw bytes; the idempotency-key must equal the upload id.",
    description:
      "The idempotency-key must equal the path's upload id (else invalid_request naming both); the part's durable identity is that upload and the path's part number. The bytes must have the length and SHA-256 the manifest declares for the part (else invalid_request naming the expected and received digest). Repeating a part with the same bytes verifies the original; changed bytes, or an upload no longer reserved, give conflict; an expired upload gives gone.",
    tag: "sources",
    security: { kind: "tenant", scope: "submit" },
    request: {
      params: partParams(),
      query: repositoryQuery(),
      body: {
        encoding: "bytes",
        maxBytes: SOURCE_LIMITS.maxChunkBytes,
        description: "The part's raw bytes (application/octet-stream), at most 4194304 bytes.",
      },
    },
    response: { encoding: "none", description: "The part is held." },
    refusals: [...A, ...K, "invalid_request", "not_found", "gone", "conflict"],
    keyed: true,
    idempotency: "durable-owner",
  }),
  defineOperation({
    id: "sources.chunk.check",
    method: "GET",
    path: "/api/sources/{upload}/chunks/{part}",
    summary:
      "Whether the service holds a part (sent, or reused from bytes it already stores); present=false when absent.",
    description:
      "sha256 must equal the manifest's digest for the part, else conflict. When the tenant's store already holds bytes with that digest they are attached to the upload and present is true, so the client skips sending them.",
    tag: "sources",
    security: { kind: "tenant", scope: "submit" },
    request: {
      params: partParams(),
      query: Type.Object(
        {
          repository: RepositoryName("The repository the upload is bound to."),
          sha256: Sha256Hex("The part's SHA-256 as declared in the manifest."),
        },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: SourceChunkStatus },
    refusals: [...A, "invalid_request", "not_found", "gone", "conflict"],
    keyed: false,
  }),
  defineOperation({
    id: "sources.complete",
    method: "POST",
    path: "/api/sources/{upload}/complete",
    summary: "Verify every part and file digest of an upload; the idempotency-key must equal the upload id.",
    description:
      "The idempotency-key must equal the path's upload id (else invalid_request). Answers the upload verified (a job may now claim it) or rejected (the parts cannot produce the manifest's files). Missing parts are refused conflict naming them; an expired upload gives gone. Repeated completion returns the same upload and preserves the original owner.",
    tag: "sources",
    security: { kind: "tenant", scope: "submit" },
    request: { params: uploadParams(), query: repositoryQuery() },
    response: { encoding: "json", schema: SourceUpload },
    refusals: [...A, ...K, "invalid_request", "not_found", "gone", "conflict"],
    keyed: true,
    idempotency: "durable-owner",
  }),
];
