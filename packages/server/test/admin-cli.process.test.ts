import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { findPersonByEmail, openStorage } from "@kiln/storage";

const MAIN = fileURLToPath(new URL("../src/main.js", import.meta.url));
const run = promisify(execFile);
/**
 * The machine's own node (scripts/run-tests.mjs sets KILN_TEST_MACHINE_NODE) when it lacks the
 * Node-API 10 that better-sqlite3 13 needs, as Node.js 20 does; else none, and the test that
 * needs one is skipped.
 */
const nodeWithoutNodeApi10 = (() => {
  const node = process.env.KILN_TEST_MACHINE_NODE;
  if (node === undefined) return undefined;
  return Number(execFileSync(node, ["-p", "process.versions.napi"], { encoding: "utf8" })) < 10 ? node : undefined;
})();

describe("kiln-server admin --json (DESIGN.md §7)", () => {
  let dataDir: string;
  const admin = async (...args: string[]) => {
    const { stdout } = await run(process.execPath, [MAIN, "admin", ...args, "--json"], {
      env: { ...process.env, KILN_DATA_DIR: dataDir, KILN_DATABASE_URL: "" },
    });
    return JSON.parse(stdout) as Record<string, unknown>;
  };
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "kiln-admin-"));
  });
  after(() => rm(dataDir, { recursive: true, force: true }));

  it("on a node without Node-API 10 (Node.js 20) a SQLite data dir is refused by name, not a crash", {
    skip: nodeWithoutNodeApi10 === undefined && "this machine's node has Node-API 10",
  }, async () => {
    const refused = await run(nodeWithoutNodeApi10 ?? "", [MAIN, "admin", "tenant", "create", "acme", "--json"], {
      env: { ...process.env, KILN_DATA_DIR: dataDir, KILN_DATABASE_URL: "" },
    }).then(
      () => assert.fail("kiln-server admin ran on a node without Node-API 10"),
      (error: { code: number | null; signal: string | null; stderr: string }) => error,
    );
    assert.deepEqual({ code: refused.code, signal: refused.signal }, { code: 1, signal: null }, refused.stderr);
    assert.match(refused.stderr, /SQLite storage needs Node\.js 22\.14 or later \(Node-API 10\); this is v\d+/);
  });

  it("tenant create, user add and repo onboard print JSON and write the same data dir the server reads", async () => {
    assert.deepEqual(await admin("tenant", "create", "acme"), { tenant: "acme", display_name: "acme", created: true });
    const added = await admin("user", "add", "Ada@Acme.dev", "--tenant", "acme", "--role", "admin", "--name", "Ada");
    assert.equal(added.email, "ada@acme.dev");
    assert.equal(added.role, "admin");
    assert.match(String(added.user_id), /^usr_[0-9a-f]{20}$/);
    const again = await admin("user", "add", "ada@acme.dev", "--tenant", "acme", "--role", "viewer");
    assert.equal(again.user_id, added.user_id);
    assert.equal(again.role, "viewer");
    assert.deepEqual(await admin("repo", "onboard", "acme/widget", "--tenant", "acme"), {
      repository: "acme/widget",
      tenant: "acme",
    });
    const storage = await openStorage({ dataDir });
    try {
      assert.equal((await findPersonByEmail(storage, "ada@acme.dev"))?.id, added.user_id);
    } finally {
      await storage.close();
    }
  });

  it("sign-in-link prints a one-time link; operator-credential prints the same credential until --rotate", async () => {
    const { url } = (await admin("sign-in-link", "ada@acme.dev", "--tenant", "acme")) as { url: string };
    assert.match(url, /^http:\/\/127\.0\.0\.1:7860\/auth\/sign-in\?token=[A-Za-z0-9_-]{43}$/);
    await assert.rejects(admin("sign-in-link", "nobody@acme.dev"), /no person/);
    const first = (await admin("operator-credential")) as { credential: string };
    assert.match(first.credential, /^kiln_operator_/);
    assert.deepEqual(await admin("operator-credential"), first);
    const rotated = (await admin("operator-credential", "--rotate")) as { credential: string };
    assert.notEqual(rotated.credential, first.credential);
    assert.deepEqual(await admin("operator-credential"), rotated);
  });

  it("refuses bad input with a message and a failing exit status", async () => {
    await assert.rejects(admin("tenant", "create", "Not A Slug"), /tenant must match/);
    await assert.rejects(admin("user", "add", "x@y.z", "--tenant", "acme", "--role", "emperor"), /role/);
    await assert.rejects(admin("user", "add", "x@y.z", "--tenant", "nobody", "--role", "member"));
    await assert.rejects(admin("repo", "onboard", "no-slash", "--tenant", "acme"), /owner\/name/);
  });
});
