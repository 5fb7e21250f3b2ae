import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient } from "@kiln/client";
import { LocalBlobStore } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { createKilnMcpServer, discoverScopes } from "../src/index.js";
import { type KilnUnderTest, startKiln } from "./harness.js";

interface Usage {
  period: string;
  as_of: string | null;
  totals: { vcpu_seconds: number; attempts: number; jobs: number };
  repositories: { repository: string; vcpu_seconds: number }[];
}

/**
 * The kiln://usage resource on each engine: it is usage.report of the current period, the same
 * document the API answers, and a credential without the read scope cannot read it.
 */
for (const dialect of DIALECTS) {
  describe(`the kiln://usage resource (${dialect.name})`, { skip: dialect.skip }, () => {
    let kiln: KilnUnderTest;
    const clients: Client[] = [];
    let settledMonth: string;

    const open = async (token: string) => {
      const api = createClient({ endpoint: kiln.endpoint, token });
      const server = createKilnMcpServer({ client: api, scopes: await discoverScopes(api) });
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      const client = new Client({ name: "kiln-mcp-usage-test", version: "0" });
      await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
      clients.push(client);
      return client;
    };

    before(async () => {
      kiln = await startKiln({ storage: await dialect.openFresh() });
      const { acceptJob, claimJob, finishJob } = await import("@kiln/server/testing");
      // One job that started a minute ago and settled half a minute ago (usage counts what settled
      // by the moment it is read), so the current period holds it (the fixture meters 60 vCPU-seconds).
      const started = new Date(Date.now() - 60_000);
      settledMonth = started.toISOString().slice(0, 7);
      const job = await acceptJob(kiln.storage, { tenant: kiln.tenant, now: started, repository: "acme/widget" });
      const lease = await claimJob(kiln.storage, job.id, started);
      const blobs = new LocalBlobStore(mkdtempSync(join(tmpdir(), "kiln-mcp-usage-blobs-")));
      await finishJob(kiln.storage, blobs, lease, { now: new Date(started.getTime() + 30_000), cargoOutput: null });
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.close()));
      await kiln.close();
    });

    it("reads usage.report of the current period: the API's own document", async () => {
      const client = await open(await kiln.mintAgent(["read"], "usage-reader"));
      const read = await client.readResource({ uri: "kiln://usage" });
      assert.equal(read.contents[0]?.mimeType, "application/json");
      const resource = JSON.parse(String((read.contents[0] as { text?: string } | undefined)?.text)) as Usage;
      const report = (await kiln.owner.call("usage.report", { query: { period: resource.period } })) as Usage;
      // The same document but for the instant each was read at.
      assert.deepEqual({ ...resource, as_of: null }, { ...report, as_of: null });
      if (resource.period === settledMonth) {
        assert.equal(resource.totals.attempts, 1);
        assert.equal(resource.totals.vcpu_seconds, 60);
        assert.deepEqual(
          resource.repositories.map((r) => [r.repository, r.vcpu_seconds]),
          [["acme/widget", 60]],
        );
      }
    });

    it("a credential without the read scope is not offered it and cannot read it", async () => {
      const client = await open(await kiln.mintAgent(["submit"], "no-read"));
      assert.deepEqual((await client.listResources()).resources, []);
      await assert.rejects(client.readResource({ uri: "kiln://usage" }), McpError);
    });
  });
}
