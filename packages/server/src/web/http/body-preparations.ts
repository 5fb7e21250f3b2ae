import { createHash } from "node:crypto";
import type { BodyOf } from "@kiln/contract";
import type { FastifyRequest } from "fastify";
import { admitInlineFiles } from "../../domain/policy/inline-file-rules.js";
import { type Outcome, outcomeOf } from "../../domain/refusal-outcome.js";
import { deflateManifestJson, inflateManifestJsonSync } from "../../domain/sources/manifest-codec.js";
import { type ValidatedManifest, validateManifest } from "../../domain/sources/validate-manifest.js";
import { requestHashOf } from "./request-hash.js";

/**
 * What a handler needs of a large body beyond its members — the tenant-sized work done once per
 * body: its idempotency hash, its inline bytes decoded, its manifest checked. For a body above
 * LARGE_BODY_BYTES the body worker (body-worker.ts) parses, validates and prepares it off the
 * event loop and sends back the body without its bulk (`strip`) and the preparation; the event
 * loop puts the bulk back lazily (`restore`), so the handler sees the catalogue's body either way
 * but never touches millions of numbers or tens of thousands of entries unless it reads them.
 * For a smaller body the handler prepares it on the event loop with the same function
 * (preparedBody), so there is one rule whichever thread ran it.
 *
 * Only the operations whose bodies may be large have a preparation: jobs.submit (16 MiB) and
 * sources.reserve (256 MiB); every other operation's body is at most Fastify's 1 MiB default.
 */
export const LARGE_BODY_BYTES = 256 * 1024;

/** jobs.submit: the submission's identity and, for an inline source, its files as bytes. */
export interface PreparedSubmission {
  readonly requestHash: string;
  /** null for an archive reference. */
  readonly inline: PreparedInlineSource | null;
}

export interface PreparedInlineSource {
  /** body.workspace.source.files[i]'s bytes, aligned by index. */
  readonly bytes: readonly Uint8Array[];
  /** Their SHA-256 digests (the blob store's key), aligned likewise. */
  readonly sha256: readonly string[];
  /** The inline source's path rules (admitInlineFiles), thrown where admission checks them. */
  readonly rules: Outcome<null>;
}

/** sources.reserve: the manifest's rules and identity (validateManifest), and its JSON compressed as stored. */
export interface PreparedReservation {
  readonly validated: Outcome<ValidatedManifest>;
  /**
   * What `source_uploads.manifest_deflated` stores (domain/sources/manifest-codec.ts); also where the
   * entries come back from if anything reads them, so the worker hands over a seventh of the bytes.
   */
  readonly manifestDeflated: Uint8Array;
}

interface BodyPreparation<Body, Prepared> {
  readonly prepare: (body: Body) => Prepared;
  /** The worker: takes the bulk out of the body (the preparation holds it). */
  readonly strip: (body: Body, prepared: Prepared) => void;
  /** The event loop: puts the bulk back as members computed when first read. */
  readonly restore: (body: Body, prepared: Prepared) => void;
  /** What the worker hands over rather than copies. */
  readonly transfer: (prepared: Prepared) => ArrayBuffer[];
}

/** `object[member]` computed by `compute` when first read (then kept), enumerable as a member is. */
function lazyMember(object: object, member: string, compute: () => unknown): void {
  let value: unknown;
  let computed = false;
  Object.defineProperty(object, member, {
    enumerable: true,
    configurable: true,
    get() {
      if (!computed) {
        value = compute();
        computed = true;
      }
      return value;
    },
    set(next: unknown) {
      value = next;
      computed = true;
    },
  });
}

const submission: BodyPreparation<BodyOf<"jobs.submit">, PreparedSubmission> = {
  prepare: (body) => {
    const source = body.workspace.source;
    if (!("files" in source)) return { requestHash: requestHashOf("jobs.submit", body), inline: null };
    const bytes = source.files.map((file) => Uint8Array.from(file.bytes));
    return {
      requestHash: requestHashOf("jobs.submit", body),
      inline: {
        bytes,
        sha256: bytes.map((b) => createHash("sha256").update(b).digest("hex")),
        rules: outcomeOf(() => {
          admitInlineFiles(source.files);
          return null;
        }),
      },
    };
  },
  strip: (body) => {
    const source = body.workspace.source;
    if ("files" in source) for (const file of source.files) file.bytes = [];
  },
  restore: (body, prepared) => {
    const source = body.workspace.source;
    if (!("files" in source) || prepared.inline === null) return;
    const inline = prepared.inline;
    source.files.forEach((file, index) => {
      const bytes = inline.bytes[index] ?? new Uint8Array();
      lazyMember(file, "bytes", () => Array.from(bytes));
    });
  },
  transfer: (prepared) => (prepared.inline?.bytes ?? []).map((bytes) => bytes.buffer as ArrayBuffer),
};

const reservation: BodyPreparation<BodyOf<"sources.reserve">, PreparedReservation> = {
  prepare: (body) => ({
    validated: outcomeOf(() => validateManifest(body)),
    manifestDeflated: deflateManifestJson(JSON.stringify(body.manifest)),
  }),
  strip: (body) => {
    // The parts stay (the handler attaches held ones); the entries are what is large.
    body.manifest.entries = [];
  },
  restore: (body, prepared) => {
    lazyMember(
      body.manifest,
      "entries",
      () => (JSON.parse(inflateManifestJsonSync(prepared.manifestDeflated)) as typeof body.manifest).entries,
    );
  },
  transfer: (prepared) => [prepared.manifestDeflated.buffer as ArrayBuffer],
};

/** The operations whose bodies are prepared, and how. */
export const BODY_PREPARATIONS = {
  "jobs.submit": submission,
  "sources.reserve": reservation,
} as const;

export type PreparedOperation = keyof typeof BODY_PREPARATIONS;

type PreparedOf<Id extends PreparedOperation> = ReturnType<(typeof BODY_PREPARATIONS)[Id]["prepare"]>;

export const isPreparedOperation = (id: string): id is PreparedOperation => Object.hasOwn(BODY_PREPARATIONS, id);

/** A preparation as the body worker and the parser hold it, for any of the operations. */
export function preparationOf(id: PreparedOperation): BodyPreparation<unknown, unknown> {
  return BODY_PREPARATIONS[id] as unknown as BodyPreparation<unknown, unknown>;
}

declare module "fastify" {
  interface FastifyRequest {
    /** A large body's preparation, made by the body worker (body-parsers.ts). */
    preparedBody?: { readonly operation: PreparedOperation; readonly prepared: unknown };
  }
}

/**
 * The preparation of operation `id`'s body: the worker's, when the body was large enough to be
 * parsed there, else made now on the event loop (a small body: milliseconds at most).
 */
export function preparedBody<Id extends PreparedOperation>(
  ctx: { readonly request: FastifyRequest; readonly body: BodyOf<Id> },
  id: Id,
): PreparedOf<Id> {
  const held = ctx.request.preparedBody;
  if (held !== undefined && held.operation === id) return held.prepared as PreparedOf<Id>;
  return (BODY_PREPARATIONS[id].prepare as unknown as (body: BodyOf<Id>) => PreparedOf<Id>)(ctx.body);
}
