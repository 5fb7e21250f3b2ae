/**
 * Streamed source archives for tests: a manifest built by the transport's rules (files packed
 * into parts, segments, canonical digest computed independently of the server) and a client
 * for the six sources operations over `app.inject`.
 */
import { createHash } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { bearer } from "../src/testing/harness.js";

export const sha256 = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

export interface ArchiveFile {
  path: string;
  content: Buffer | string;
  executable?: boolean;
}
export interface ArchiveLink {
  path: string;
  target: string;
}

export interface Archive {
  // biome-ignore lint/suspicious/noExplicitAny: the reservation is edited freely by malformed-case tests.
  reservation: any;
  parts: Buffer[];
  manifestSha256: string;
}

/** Packs every file, in path order, into parts of at most `partBytes`, splitting files across parts. */
export function archiveOf(
  files: ArchiveFile[],
  links: ArchiveLink[] = [],
  opts: { repository?: string; partBytes?: number } = {},
): Archive {
  const partBytes = opts.partBytes ?? 4 * 2 ** 20;
  const byPath = (a: { path: string }, b: { path: string }) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path));
  const parts: Buffer[] = [];
  let current: Buffer[] = [];
  let currentBytes = 0;
  const flush = () => {
    if (currentBytes > 0) parts.push(Buffer.concat(current));
    current = [];
    currentBytes = 0;
  };
  const all = [
    ...files.map((f) => ({ ...f, kind: "file" as const })),
    ...links.map((l) => ({ ...l, kind: "symlink" as const })),
  ].sort(byPath);
  // biome-ignore lint/suspicious/noExplicitAny: manifest entries are plain JSON.
  const entries: any[] = [];
  let canonical = "";
  let fileBytes = 0;
  const directories = new Set<string>();
  for (const entry of all) {
    const segments = entry.path.split("/");
    for (let i = 1; i < segments.length; i++) directories.add(segments.slice(0, i).join("/"));
    if (entry.kind === "symlink") {
      entries.push({ kind: "symlink", path: entry.path, target: entry.target });
      canonical += `symlink\t${entry.target}\t${entry.path}\n`;
      continue;
    }
    const content = Buffer.from(entry.content);
    const pieces = [];
    for (let offset = 0; offset < content.length; ) {
      if (currentBytes === partBytes) flush();
      const length = Math.min(partBytes - currentBytes, content.length - offset);
      pieces.push({ part: parts.length + 1, offset: currentBytes, length });
      current.push(content.subarray(offset, offset + length));
      currentBytes += length;
      offset += length;
    }
    const executable = entry.executable ?? false;
    entries.push({
      kind: "file",
      path: entry.path,
      executable,
      size: content.length,
      sha256: sha256(content),
      segments: pieces,
    });
    canonical += `file\t${executable ? 1 : 0}\t${content.length}\t${sha256(content)}\t${entry.path}\n`;
    fileBytes += content.length;
  }
  flush();
  return {
    reservation: {
      repository: opts.repository ?? "acme/widget",
      format_version: 1,
      totals: {
        file_bytes: fileBytes,
        entries: entries.length,
        directories: directories.size,
        metadata_bytes: Buffer.byteLength(canonical),
        parts: parts.length,
        part_bytes: parts.reduce((n, p) => n + p.length, 0),
      },
      manifest: { entries, parts: parts.map((p, i) => ({ part: i + 1, sha256: sha256(p), bytes: p.length })) },
    },
    parts,
    manifestSha256: sha256(canonical),
  };
}

export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: documents are checked against the contract by checkResponses.
  json(): any;
  body: string;
}

/** The sources operations as one tenant person, over inject. */
export class Sources {
  constructor(
    readonly app: FastifyInstance,
    readonly token: string,
    readonly repository = "acme/widget",
  ) {}

  private async call(method: "GET" | "POST", url: string, opts: { key?: string; json?: unknown; bytes?: Buffer } = {}) {
    const res = await this.app.inject({
      method,
      url,
      headers: {
        ...bearer(this.token),
        ...(opts.key === undefined ? {} : { "idempotency-key": opts.key }),
        ...(opts.json === undefined ? {} : { "content-type": "application/json" }),
        ...(opts.bytes === undefined ? {} : { "content-type": "application/octet-stream" }),
      },
      ...(opts.json === undefined ? {} : { payload: JSON.stringify(opts.json) }),
      ...(opts.bytes === undefined ? {} : { payload: opts.bytes }),
    });
    return { status: res.statusCode, body: res.body, json: () => JSON.parse(res.body) } satisfies Answer;
  }

  private q(repository = this.repository) {
    return `repository=${encodeURIComponent(repository)}`;
  }

  capabilities(repository = this.repository) {
    return this.call("GET", `/api/source-capabilities?${this.q(repository)}`);
  }
  reserve(reservation: unknown, key: string) {
    return this.call("POST", "/api/sources", { key, json: reservation });
  }
  status(upload: string, repository = this.repository) {
    return this.call("GET", `/api/sources/${upload}?${this.q(repository)}`);
  }
  check(upload: string, part: number, digest: string, repository = this.repository) {
    return this.call("GET", `/api/sources/${upload}/chunks/${part}?${this.q(repository)}&sha256=${digest}`);
  }
  put(upload: string, part: number, bytes: Buffer, key = upload, repository = this.repository) {
    return this.call("POST", `/api/sources/${upload}/chunks/${part}?${this.q(repository)}`, { key, bytes });
  }
  complete(upload: string, key = upload, repository = this.repository) {
    return this.call("POST", `/api/sources/${upload}/complete?${this.q(repository)}`, { key });
  }

  /** reserve → check each part → put the absent ones → complete; returns the completed upload. */
  async upload(archive: Archive, id: string): Promise<Answer> {
    const reserved = await this.reserve(archive.reservation, id);
    if (reserved.status !== 200) throw new Error(`reserve ${id}: ${reserved.body}`);
    for (const [index, bytes] of archive.parts.entries()) {
      const check = await this.check(id, index + 1, sha256(bytes));
      if (check.status !== 200) throw new Error(`check ${id}/${index + 1}: ${check.body}`);
      if (check.json().present) continue;
      const put = await this.put(id, index + 1, bytes);
      if (put.status !== 204) throw new Error(`put ${id}/${index + 1}: ${put.body}`);
    }
    return this.complete(id);
  }
}

/** A jobs.submit body naming a streamed archive. */
export function archiveSubmission(
  upload: string,
  manifestSha256: string,
  invocation: Record<string, unknown> = {},
  repository = "acme/widget",
) {
  return {
    schema_version: 2,
    repository,
    size: "kiln2-cpu",
    workspace: {
      base_commit: "0123456789abcdef0123456789abcdef01234567",
      branch: "main",
      invocation: { operation: "test", arguments: [], ...invocation },
      source: { archive: { upload, manifest_sha256: manifestSha256 } },
    },
  };
}
