/**
 * `kiln-server serve` keeps its data dir to itself (issue 33: a tenant's source was read as uid
 * 65534): the directory is 0700 even where an earlier version left it open, and what the server
 * writes there at start (the master key, the SQLite database and its WAL) is 0600.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { pathsOpenToOthers } from "@kiln/storage/testing";
import { type ServerProcess, startServerProcess, stopServerProcess } from "./server-process.js";

describe("kiln-server's data dir", () => {
  const parent = mkdtempSync(join(tmpdir(), "kiln-data-dir-"));
  chmodSync(parent, 0o755);
  let server: ServerProcess | undefined;
  after(async () => {
    await stopServerProcess(server);
    rmSync(parent, { recursive: true, force: true });
  });

  it("is 0700 with its files 0600, even where an earlier version left it open; nobody lists it", async () => {
    const dataDir = join(parent, "data");
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    server = await startServerProcess({
      KILN_DATA_DIR: dataDir,
      KILN_DATABASE_URL: undefined,
      KILN_MASTER_KEY: undefined,
      KILN_LOCAL_HOST: "off",
    });
    const names = readdirSync(dataDir);
    for (const name of ["master.key", "kiln.sqlite3"]) assert.ok(names.includes(name), names.join());
    assert.deepEqual(pathsOpenToOthers(dataDir), []);
    const listed = spawnSync("runuser", ["-u", "nobody", "--", "ls", dataDir], { encoding: "utf8" });
    assert.notEqual(listed.status, 0, `nobody listed the data dir: ${listed.stdout}`);
    assert.match(listed.stderr, /Permission denied/);
  });
});
