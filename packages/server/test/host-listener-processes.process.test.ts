import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { silentLogger } from "@kiln/contract";
import { HostProtocolRefusal, httpHostProtocol, loadHostIdentity, tlsFilesIn } from "@kiln/host";
import { createPostgresTestDatabase, DIALECTS } from "@kiln/storage/testing";
import { type ServerProcess, startServerProcess, stopServerProcess } from "./server-process.js";

const MAIN = fileURLToPath(new URL("../src/main.js", import.meta.url));
const run = promisify(execFile);

const postgres = DIALECTS.find((d) => d.name === "postgres");

/** The host listener a `kiln-server serve` prints once it listens: its origin and the CA's digest. */
async function hostListenerOf(server: ServerProcess): Promise<{ origin: string; caSha256: string }> {
  const pattern = /host listener \(mutual TLS\): (https:\/\/\S+) for .*; host CA sha256 ([0-9a-f]{64})/;
  for (;;) {
    const match = pattern.exec(server.output());
    if (match?.[1] !== undefined && match[2] !== undefined) return { origin: match[1], caSha256: match[2] };
    const stdout = server.child.stdout;
    assert.ok(stdout !== null && server.child.exitCode === null, server.output());
    // Checked and subscribed in one turn: no output can arrive in between.
    await once(stdout, "data");
  }
}

/**
 * Two real `kiln-server serve` processes on one PostgreSQL database, each with its host listener
 * (KILN_HOST_LISTEN) and the deployment's one master key: they serve one CA (made by whichever
 * started first and kept sealed in the database), so a host enrolled through one is taken by the
 * other, and a revocation made with the admin CLI is refused by both.
 */
describe("the host CA shared by two kiln-server processes on one PostgreSQL", { skip: postgres?.skip ?? false }, () => {
  let database: { url: string; drop: () => Promise<void> };
  const servers: ServerProcess[] = [];
  const dirs: string[] = [];
  const masterKey = randomBytes(32).toString("hex");
  const envOf = (dataDir: string) => ({
    KILN_DATABASE_URL: database.url,
    KILN_DATA_DIR: dataDir,
    KILN_MASTER_KEY: masterKey,
    KILN_LOCAL_HOST: "off",
    KILN_HOST_LISTEN: "127.0.0.1:0",
    KILN_HOST_TLS_NAMES: "127.0.0.1",
  });

  before(async () => {
    database = await createPostgresTestDatabase();
    for (let i = 0; i < 2; i++) {
      const dataDir = mkdtempSync(join(tmpdir(), "kiln-host-listener-proc-"));
      dirs.push(dataDir);
      servers.push(await startServerProcess(envOf(dataDir)));
    }
  });
  after(async () => {
    for (const server of servers) await stopServerProcess(server);
    await database.drop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("a host enrolled through one server is served by the other; an admin revocation is refused by both", async () => {
    const [a, b] = await Promise.all(servers.map(hostListenerOf));
    assert.ok(a !== undefined && b !== undefined);
    assert.equal(a.caSha256, b.caSha256, "one CA for the deployment");
    assert.notEqual(a.origin, b.origin);
    const admin = async (...args: string[]) => {
      const adminDir = mkdtempSync(join(tmpdir(), "kiln-host-listener-admin-"));
      dirs.push(adminDir);
      const { stdout } = await run(process.execPath, [MAIN, "admin", "host", ...args, "--json"], {
        env: { ...process.env, ...envOf(adminDir) },
      });
      return JSON.parse(stdout) as Record<string, unknown>;
    };
    const minted = await admin("enrollment-token", "builder-7");
    assert.equal(minted.ca_sha256, a.caSha256);
    const hostDir = mkdtempSync(join(tmpdir(), "kiln-host-listener-host-"));
    dirs.push(hostDir);
    const identity = await loadHostIdentity(
      {
        endpoint: a.origin,
        enrollmentToken: String(minted.enrollment_token),
        caSha256: String(minted.ca_sha256),
        tlsFiles: tlsFilesIn(hostDir),
      },
      silentLogger,
    );
    assert.equal(identity.hostId, "builder-7");
    for (const origin of [a.origin, b.origin]) {
      const protocol = httpHostProtocol({ endpoint: origin, identity });
      await protocol.enroll({ id: "builder-7", vcpus: 2, memoryBytes: 2 ** 32, isolation: "sandbox" });
      assert.equal(await protocol.claim("builder-7", 2), null, origin);
    }
    assert.deepEqual(await admin("revoke", "builder-7"), { host: "builder-7", revoked: 1 });
    for (const origin of [a.origin, b.origin]) {
      await assert.rejects(
        httpHostProtocol({ endpoint: origin, identity }).claim("builder-7", 2),
        (error: unknown) => error instanceof HostProtocolRefusal && error.code === "credential_revoked",
        origin,
      );
    }
  });
});
