import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { type RecordingServer, startRecordingServer, type TestTls } from "./hostile-upstreams.js";

/**
 * A real git server over HTTPS on 127.0.0.1 (git's smart HTTP protocol, served by
 * `git http-backend` as CGI) for the dependency gateway's git dependencies in tests: the
 * gateway fetches git over https only, through its egress proxy, so a test repository is served
 * as a real upstream would serve it. Repositories are registered by name and served at
 * `https://127.0.0.1:<port>/<name>.git`.
 */
export interface GitServer extends RecordingServer {
  /** Serves the repository at `path` (a work tree or bare repository) as `<name>.git`; returns its URL. */
  serve(name: string, path: string): string;
}

export async function startGitServer(tls: TestTls): Promise<GitServer> {
  const repositories = new Map<string, string>();
  const server = await startRecordingServer(
    (req, res, origin) => {
      const url = new URL(req.url ?? "/", origin);
      const [, first = "", ...rest] = url.pathname.split("/");
      const path = repositories.get(first);
      if (path === undefined) {
        res.writeHead(404).end();
        return;
      }
      const child = spawn("git", ["http-backend"], {
        env: {
          PATH: "/usr/bin:/bin",
          GIT_CONFIG_NOSYSTEM: "1",
          GIT_CONFIG_GLOBAL: "/dev/null",
          GIT_PROJECT_ROOT: dirname(path),
          GIT_HTTP_EXPORT_ALL: "1",
          PATH_INFO: `/${basename(path)}/${rest.join("/")}`,
          REQUEST_METHOD: req.method ?? "GET",
          QUERY_STRING: url.search.replace(/^\?/, ""),
          CONTENT_TYPE: String(req.headers["content-type"] ?? ""),
          REMOTE_ADDR: "127.0.0.1",
          ...(req.headers["content-encoding"] === undefined
            ? {}
            : { HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"]) }),
          ...(req.headers["git-protocol"] === undefined ? {} : { GIT_PROTOCOL: String(req.headers["git-protocol"]) }),
        },
        stdio: ["pipe", "pipe", "ignore"],
      });
      req.pipe(child.stdin);
      let head = Buffer.alloc(0);
      let headersDone = false;
      child.stdout.on("data", (chunk: Buffer) => {
        if (headersDone) {
          res.write(chunk);
          return;
        }
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf("\r\n\r\n");
        if (end === -1) return;
        headersDone = true;
        let status = 200;
        const headers: Record<string, string> = {};
        for (const line of head.toString("latin1", 0, end).split("\r\n")) {
          const colon = line.indexOf(":");
          if (colon === -1) continue;
          const name = line.slice(0, colon).trim();
          const value = line.slice(colon + 1).trim();
          if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
          else headers[name] = value;
        }
        res.writeHead(status, headers);
        res.write(head.subarray(end + 4));
      });
      child.on("close", () => res.end());
      child.on("error", () => res.destroy());
    },
    { tls },
  );
  return {
    ...server,
    serve(name, path) {
      repositories.set(`${name}.git`, path);
      return `${server.origin}/${name}.git`;
    },
  };
}

/**
 * A git repository at `dir` whose one commit (branch `main`) holds `files`, made with the
 * system's git and no user configuration; returns the commit's id.
 */
export function commitRepository(dir: string, files: Readonly<Record<string, string>>): string {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const git = (args: string[]) =>
    execFileSync("git", ["-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", ...args], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    })
      .toString()
      .trim();
  git(["init", "--quiet", "--initial-branch=main"]);
  git(["add", "."]);
  git(["commit", "--quiet", "-m", "the repository's files"]);
  return git(["rev-parse", "HEAD"]);
}
