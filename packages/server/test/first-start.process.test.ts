/**
 * A first `kiln-server serve` on a fresh data dir, as a new operator meets it (issue 36,
 * "operator and first run"): management readiness is `ready` before any blob was written (it
 * reported `blob_store_unwritable … ENOENT` until the first one), the embedded host offers the
 * machine's vCPUs (it offered at least 16 on a two-core machine), and the start banner tells
 * how to log the CLI in with the command that exists.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { openStorage } from "@kiln/storage";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";
import { type ServerProcess, startServerProcess, stopServerProcess } from "./server-process.js";

async function until(condition: () => boolean, describe: () => string): Promise<void> {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > 30_000) assert.fail(`not printed: ${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("kiln-server's first start on a fresh data dir", () => {
  const parent = mkdtempSync(join(tmpdir(), "kiln-first-start-"));
  const dataDir = join(parent, "data");
  let server: ServerProcess | undefined;
  after(async () => {
    await stopServerProcess(server);
    rmSync(parent, { recursive: true, force: true });
  });

  it("is ready, offers the machine's vCPUs and names `kiln login --server` in its banner", async () => {
    server = await startServerProcess({
      KILN_DATA_DIR: dataDir,
      KILN_DATABASE_URL: undefined,
      KILN_MASTER_KEY: undefined,
      KILN_BLOB_URL: undefined,
      KILN_EXECUTOR: "sandbox",
      KILN_LOCAL_HOST: undefined,
      KILN_LOCAL_HOST_VCPUS: undefined,
    });
    // The banner's lines follow the one startServerProcess waits for: read once it has printed the last.
    const running = server;
    await until(() => /log the CLI in/.test(running.output()), running.output);
    assert.match(server.output(), new RegExp(`log the CLI in: kiln login --server ${server.url}`));
    assert.doesNotMatch(server.output(), /arrives with the CLI/);

    // An operator session on the running server, with the credential its data dir's key seals.
    const storage = await openStorage({ dataDir });
    let credential: string;
    try {
      credential = await operatorCredential(storage, masterKey(dataDir, {}), false, new Date());
    } finally {
      await storage.close();
    }
    const session = await fetch(`${server.url}/operator/auth/session`, {
      method: "POST",
      headers: { authorization: `Bearer ${credential}` },
    });
    assert.equal(session.status, 204, await session.text());
    const cookie = /kiln_operator_session=[^;]+/.exec(session.headers.get("set-cookie") ?? "")?.[0];
    assert.ok(cookie !== undefined);
    const states = (await (
      await fetch(`${server.url}/operator/api/platform/states`, {
        headers: { cookie, "sec-fetch-site": "same-origin" },
      })
    ).json()) as {
      management_readiness: { state: string; reason: { code: string; detail: string } };
      hosts: { host: string; vcpus_total?: number }[];
    };
    assert.deepEqual(
      [states.management_readiness.state, states.management_readiness.reason.code],
      ["ok", "ready"],
      states.management_readiness.reason.detail,
    );
    const local = states.hosts.find((h) => h.host === "local");
    assert.ok(local !== undefined, JSON.stringify(states.hosts));
    assert.equal(local.vcpus_total, availableParallelism());
  });
});
