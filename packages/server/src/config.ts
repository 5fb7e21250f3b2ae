import { resolve } from "node:path";
import { DEFAULT_CRATES_IO_INDEX } from "@kiln/host";

/** The harness contract of DESIGN.md §7: KILN_LISTEN, KILN_DATA_DIR, KILN_DATABASE_URL. */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** KILN_PUBLIC_URL: where people and devices reach kiln; defaults to the listen address. */
  readonly publicOrigin: string | undefined;
  /**
   * KILN_CRATES_IO_INDEX: the sparse index standing for crates.io in the dependency gateway
   * (a mirror; a test registry); downloads follow its config.json `dl`.
   */
  readonly cratesIoIndex: string;
}

export function parseListen(value: string): { host: string; port: number } {
  const match = /^(\[[0-9a-fA-F:]+\]|[^:]+):(\d{1,5})$/.exec(value.trim());
  const port = Number(match?.[2]);
  if (match?.[1] === undefined || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`KILN_LISTEN must be host:port, got ${JSON.stringify(value)}`);
  }
  return { host: match[1].replace(/^\[|\]$/g, ""), port };
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const { host, port } = parseListen(env.KILN_LISTEN ?? "127.0.0.1:7860");
  const databaseUrl = env.KILN_DATABASE_URL?.trim() || undefined;
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new Error("KILN_DATABASE_URL must be a postgres:// URL (unset it for the embedded SQLite default)");
  }
  const publicUrl = env.KILN_PUBLIC_URL?.trim() || undefined;
  let publicOrigin: string | undefined;
  if (publicUrl !== undefined) {
    const url = new URL(publicUrl);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("KILN_PUBLIC_URL must be http(s)://");
    publicOrigin = url.origin;
  } else if (port !== 0) {
    publicOrigin = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  }
  const cratesIoIndex = env.KILN_CRATES_IO_INDEX?.trim() || DEFAULT_CRATES_IO_INDEX;
  if (!/^sparse\+https?:\/\/./.test(cratesIoIndex)) {
    throw new Error("KILN_CRATES_IO_INDEX must be a sparse index URL (sparse+https://…/)");
  }
  return {
    host,
    port,
    dataDir: resolve(env.KILN_DATA_DIR ?? "./.kiln"),
    databaseUrl,
    publicOrigin,
    cratesIoIndex,
  };
}
