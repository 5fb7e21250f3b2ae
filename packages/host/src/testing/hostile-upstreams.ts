import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { sparseIndexPath } from "./sparse-registry.js";

/**
 * Upstreams that misbehave as an attacker's would, on 127.0.0.1, for tests, trials and
 * benchmarks of the dependency gateway (issue 33): a server that records every connection and
 * request it gets (to show the gateway never reached it), a gzip bomb, a download of 1.5 GiB, an
 * upstream that never answers, a redirect, and a self-signed TLS identity for https ones.
 */

/** A certificate authority and a server certificate for 127.0.0.1 and localhost, made with openssl. */
export interface TestTls {
  /** The CA's certificate (PEM): what the gateway is told to trust (KILN_GATEWAY_CA_FILE). */
  readonly caPem: string;
  readonly caFile: string;
  readonly keyPem: string;
  readonly certPem: string;
  remove(): Promise<void>;
}

export async function makeTestTls(): Promise<TestTls> {
  const dir = await mkdtemp(join(tmpdir(), "kiln-test-tls-"));
  const openssl = (args: readonly string[]) => promisify(execFile)("openssl", args);
  const at = (name: string) => join(dir, name);
  const newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await openssl([
    "req",
    "-x509",
    ...newKey,
    "-keyout",
    at("ca.key"),
    "-out",
    at("ca.pem"),
    "-days",
    "2",
    "-subj",
    "/CN=kiln test upstream CA",
  ]);
  await openssl(["req", ...newKey, "-keyout", at("server.key"), "-out", at("server.csr"), "-subj", "/CN=127.0.0.1"]);
  await writeFile(at("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n");
  await openssl([
    "x509",
    "-req",
    "-in",
    at("server.csr"),
    "-CA",
    at("ca.pem"),
    "-CAkey",
    at("ca.key"),
    "-CAcreateserial",
    "-out",
    at("server.pem"),
    "-days",
    "2",
    "-extfile",
    at("server.ext"),
  ]);
  return {
    caPem: await readFile(at("ca.pem"), "utf8"),
    caFile: at("ca.pem"),
    keyPem: await readFile(at("server.key"), "utf8"),
    certPem: await readFile(at("server.pem"), "utf8"),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** A request a recording server received. */
export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage["headers"];
}

export interface RecordingServer {
  /** `http://127.0.0.1:<port>` (or https). */
  readonly origin: string;
  readonly port: number;
  /** Every request, in order. */
  readonly requests: readonly RecordedRequest[];
  /** TCP connections accepted (a refused fetch must leave this at 0). */
  connections(): number;
  close(): Promise<void>;
}

export type UpstreamHandler = (req: IncomingMessage, res: ServerResponse, origin: string) => void;

/** An HTTP(S) server on 127.0.0.1 recording every connection and request, answering with `handler` (default 404). */
export async function startRecordingServer(
  handler: UpstreamHandler = (_req, res) => res.writeHead(404).end(),
  options: { readonly tls?: TestTls } = {},
): Promise<RecordingServer> {
  const requests: RecordedRequest[] = [];
  let connections = 0;
  let origin = "";
  const sockets = new Set<Socket>();
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
    try {
      handler(req, res, origin);
    } catch {
      res.destroy();
    }
  };
  const server: Server =
    options.tls === undefined
      ? createHttpServer(listener)
      : createHttpsServer({ key: options.tls.keyPem, cert: options.tls.certPem }, listener);
  server.on("connection", (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  origin = `${options.tls === undefined ? "http" : "https"}://127.0.0.1:${port}`;
  return {
    origin,
    port,
    requests,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A gzip stream of `decodedBytes` zeros (concatenated members of 1 MiB each): a few KB per GB decoded. */
export function gzipBomb(decodedBytes: number): Buffer {
  const member = gzipSync(Buffer.alloc(2 ** 20), { level: 9 });
  return Buffer.concat(Array.from({ length: Math.ceil(decodedBytes / 2 ** 20) }, () => member));
}

/** How a hostile registry's download of its one crate answers. */
export type HostileDownload =
  /** A 2 GiB gzip bomb as `content-encoding: gzip` (2 MB on the wire). */
  | { readonly kind: "gzip-bomb" }
  /** `bytes` of filler, streamed as fast as the client takes it; `announced` says so in content-length. */
  | { readonly kind: "huge"; readonly bytes: number; readonly announced: boolean }
  /** Headers never come. */
  | { readonly kind: "never" }
  /** A redirect to `location`. */
  | { readonly kind: "redirect"; readonly location: string };

/**
 * A sparse registry serving one crate version whose download misbehaves as `download` says; its
 * config.json and index file are honest (the index lists `checksum`, so a Cargo.lock naming the
 * crate with it gets as far as the download).
 */
export async function startHostileRegistry(options: {
  readonly crate: { readonly name: string; readonly version: string; readonly checksum: string };
  readonly download: HostileDownload;
  readonly tls?: TestTls;
  /** The `dl` config.json names (default this registry's own downloads). */
  readonly dl?: (origin: string) => string;
}): Promise<RecordingServer & { readonly indexUrl: string }> {
  const { crate, download } = options;
  const bomb = download.kind === "gzip-bomb" ? gzipBomb(2 * 2 ** 30) : null;
  const server = await startRecordingServer(
    (req, res, origin) => {
      const path = new URL(req.url ?? "/", origin).pathname;
      if (path === "/index/config.json") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ dl: options.dl?.(origin) ?? `${origin}/dl` }));
        return;
      }
      if (path === `/index/${sparseIndexPath(crate.name)}`) {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end(
          `${JSON.stringify({ name: crate.name, vers: crate.version, deps: [], cksum: crate.checksum, features: {}, yanked: false })}\n`,
        );
        return;
      }
      if (!path.startsWith("/dl")) {
        res.writeHead(404).end();
        return;
      }
      switch (download.kind) {
        case "gzip-bomb":
          res.writeHead(200, {
            "content-type": "application/gzip",
            "content-encoding": "gzip",
            "content-length": bomb?.length ?? 0,
          });
          res.end(bomb);
          return;
        case "huge": {
          res.writeHead(200, {
            "content-type": "application/gzip",
            ...(download.announced ? { "content-length": download.bytes } : {}),
          });
          const chunk = Buffer.alloc(2 ** 20, 0x61);
          let left = download.bytes;
          const pump = () => {
            while (left > 0) {
              const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
              left -= piece.length;
              if (!res.write(piece)) {
                res.once("drain", pump);
                return;
              }
            }
            res.end();
          };
          res.on("close", () => {
            left = 0;
          });
          pump();
          return;
        }
        case "never":
          // Hold the request open; the socket is closed with the server.
          return;
        case "redirect":
          res.writeHead(302, { location: download.location }).end();
          return;
      }
    },
    options.tls === undefined ? {} : { tls: options.tls },
  );
  return { ...server, indexUrl: `sparse+${server.origin}/index/` };
}
