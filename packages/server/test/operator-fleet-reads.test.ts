import assert from "node:assert/strict";
import { mkdir, mkdtemp, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setImmediate as nextTurn } from "node:timers/promises";
import { silentLogger } from "@kiln/contract";
import {
  FleetChannel,
  type HostEvent,
  type HostProtocol,
  httpHostProtocol,
  realHostReads,
  sandboxIsolation,
} from "@kiln/host";
import { registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import type { LightMyRequestResponse } from "fastify";
import { hostProtocolOf, type TestApp, testApp } from "../src/testing/harness.js";
import { HOST_READ_WAIT_SECONDS } from "../src/web/handlers/operator/operator-host-reads.js";
import { listenForHosts, type TestHostListener } from "./host-listener-fixture.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/**
 * operator.hosts.journal / kernel_log / evidence through the HTTP routes with an operator
 * session: the control plane records the read, the host answers it on its fleet poll with
 * bytes it really read (journalctl, dmesg, its evidence directory), and a host that does not
 * answer within the wait — moved on the injected clock — makes the read `upstream_failed`.
 * Every read is audited.
 */
for (const dialect of DIALECTS) {
  describe(`operator host reads (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;
    let embedded: HostProtocol;
    let evidenceRoot: string;
    let hosts: TestHostListener;
    const reporting = { log: silentLogger, emit: (_: HostEvent) => {} };

    before(async () => {
      t = await testApp(await dialect.openFresh());
      hosts = await listenForHosts(t);
      for (const id of ["local", "quiet"]) {
        await registerHost(t.storage, { id, vcpus: 8, memoryBytes: 2 ** 33, isolation: "sandbox", now: t.clock.now() });
      }
      embedded = hostProtocolOf({ storage: t.storage, blobs: t.deps.blobs, clock: t.clock });
      evidenceRoot = await mkdtemp(join(tmpdir(), "kiln-evidence-"));
      await mkdir(join(evidenceRoot, "job-1-a1"));
      await writeFile(join(evidenceRoot, "job-1-a1", "unit.log"), "unit started\nunit ended\n");
      const outside = await mkdtemp(join(tmpdir(), "kiln-outside-"));
      await writeFile(join(outside, "secret"), "not evidence");
      await symlink(join(outside, "secret"), join(evidenceRoot, "escape"));

      operator = await operatorClient(t.app, t.storage, t.clock.now());
    });
    after(() => t.close());

    const channel = (hostId: string, protocol: HostProtocol) =>
      new FleetChannel({
        hostId,
        protocol,
        clock: t.clock,
        steps: sandboxIsolation().initializationSteps,
        reporting,
        sandboxes: () => [],
        reads: realHostReads({ evidenceRoot }),
      });
    /**
     * Sends the read and, as the host, polls until it has answered one: the request is recorded
     * only once the handler runs, so the host polls again until it sees it (no timing involved).
     */
    async function readAnswered(url: string, host: FleetChannel): Promise<LightMyRequestResponse> {
      let settled = false;
      const response = Promise.resolve(operator.get(url)).finally(() => {
        settled = true;
      });
      while (!settled && (await host.runOnce()).reads === 0) await nextTurn();
      return response;
    }

    it("without an operator session the reads answer operator_not_found", async () => {
      for (const url of ["/operator/api/hosts/local/journal", "/operator/api/hosts/local/kernel-log"]) {
        const r = await t.app.inject({ method: "GET", url, headers: { "sec-fetch-site": "same-origin" } });
        assert.equal(r.statusCode, 404, url);
        assert.equal(r.json().code, "operator_not_found");
      }
      const unknown = await operator.get("/operator/api/hosts/nowhere/journal");
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.json().code, "operator_not_found");
    });

    it("the journal and the kernel log are the bytes the host read, answered through its fleet poll", async () => {
      const journal = await readAnswered("/operator/api/hosts/local/journal", channel("local", embedded));
      assert.equal(journal.statusCode, 200, journal.body);
      assert.match(journal.headers["content-type"] as string, /^text\/plain/);
      assert.equal(journal.headers["x-kiln-truncated"], "false");
      assert.ok(journal.rawPayload.length > 0, "journalctl answers at least its `-- No entries --` line");

      const kernel = await readAnswered("/operator/api/hosts/local/kernel-log", channel("local", embedded));
      assert.equal(kernel.statusCode, 200, kernel.body);
      assert.ok(kernel.rawPayload.length > 0, "the kernel log of a running machine is never empty");

      const audit = (await operator.audit()).filter((e) => e.operation.startsWith("operator.hosts."));
      assert.deepEqual(
        audit.slice(0, 2).map((e) => [e.operation, e.outcome]),
        [
          ["operator.hosts.kernel_log", "performed"],
          ["operator.hosts.journal", "performed"],
        ],
      );
    });

    it("an evidence file is read from the host's evidence directory and never from outside it", async () => {
      const file = await readAnswered(
        "/operator/api/hosts/local/evidence?path=job-1-a1/unit.log",
        channel("local", embedded),
      );
      assert.equal(file.statusCode, 200, file.body);
      assert.equal(file.body, "unit started\nunit ended\n");

      for (const path of ["../secret", "escape", "/etc/passwd", "job-1-a1/missing.log"]) {
        const refused = await readAnswered(
          `/operator/api/hosts/local/evidence?path=${encodeURIComponent(path)}`,
          channel("local", embedded),
        );
        assert.equal(refused.statusCode, 502, `${path}: ${refused.body}`);
        assert.equal(refused.json().code, "upstream_failed");
        assert.doesNotMatch(refused.body, /not evidence/);
      }
      const audit = (await operator.audit()).filter((e) => e.operation === "operator.hosts.evidence");
      assert.deepEqual(
        audit.map((e) => e.outcome),
        ["upstream_failed", "upstream_failed", "upstream_failed", "upstream_failed", "performed"],
      );
    });

    it("the evidence export is bounded JSON lines of the boot's journal, unit logs and one attempt's files, naming what it left out", async () => {
      const whole = await readAnswered(
        "/operator/api/hosts/local/evidence-export?attempt=1",
        channel("local", embedded),
      );
      assert.equal(whole.statusCode, 200, whole.body);
      assert.match(whole.headers["content-type"] as string, /^application\/x-ndjson/);
      const records = whole.body
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as { record: string; unit?: string; path?: string; content_base64?: string });
      assert.deepEqual(
        records.map((r) => r.record),
        ["journal", "unit_log", "unit_log", "attempt_file"],
      );
      assert.deepEqual(
        records.filter((r) => r.record === "unit_log").map((r) => r.unit),
        ["kiln-host.service", "kiln-server.service"],
      );
      const file = records.find((r) => r.record === "attempt_file");
      assert.equal(file?.path, "job-1-a1/unit.log");
      assert.equal(Buffer.from(file?.content_base64 ?? "", "base64").toString(), "unit started\nunit ended\n");

      // A bound too small for the attempt's file: it is left out and named.
      const bounded = await readAnswered(
        "/operator/api/hosts/local/evidence-export?attempt=1&bytes=400",
        channel("local", embedded),
      );
      assert.equal(bounded.statusCode, 200, bounded.body);
      assert.equal(bounded.headers["x-kiln-truncated"], "true");
      const lines = bounded.body
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line) as { record: string; item?: string });
      const kept = bounded.body
        .split("\n")
        .filter((line) => line !== "" && (JSON.parse(line) as { record: string }).record !== "omitted");
      assert.ok(kept.join("\n").length + kept.length <= 400, "the records kept fit the bound");
      assert.ok(
        lines.some((l) => l.record === "omitted" && l.item === "attempt_file job-1-a1/unit.log"),
        `the file left out is named: ${bounded.body}`,
      );

      const none = await readAnswered(
        "/operator/api/hosts/local/evidence-export?attempt=7",
        channel("local", embedded),
      );
      assert.equal(none.statusCode, 404, none.body);
      assert.equal(none.json().code, "not_found");
      assert.match(none.json().detail, /no retained files of an attempt 7/);

      for (const query of ["executions=1000", `bytes=${2 ** 30}`, "attempt=0"]) {
        const bad = await operator.get(`/operator/api/hosts/local/evidence-export?${query}`);
        assert.equal(bad.statusCode, 400, query);
        assert.equal(bad.json().code, "invalid_request");
      }
      const audit = (await operator.audit()).filter((e) => e.operation === "operator.hosts.evidence_export");
      assert.deepEqual(
        audit.map((e) => e.outcome),
        ["not_found", "performed", "performed"],
        "every export read is audited",
      );
    });

    it("a remote host answers over the HTTP host protocol (mutual TLS)", async () => {
      const remote = httpHostProtocol({ endpoint: hosts.origin, identity: await hosts.enroll("remote-r") });
      await remote.enroll({ id: "remote-r", vcpus: 2, memoryBytes: 2 ** 32, isolation: "sandbox" });
      const journal = await readAnswered("/operator/api/hosts/remote-r/journal", channel("remote-r", remote));
      assert.equal(journal.statusCode, 200, journal.body);
    });

    it("a host that does not answer within the wait makes the read upstream_failed, and a late answer is stale", async () => {
      const response = operator.get("/operator/api/hosts/quiet/journal");
      // The host takes the read on its poll but never answers it.
      let order: { id: string } | undefined;
      while (order === undefined) {
        order = (await embedded.fleetPoll({ hostId: "quiet", sandboxes: [] })).reads[0];
        if (order === undefined) await nextTurn();
      }
      await t.clock.advance(HOST_READ_WAIT_SECONDS * 1000);
      const failed = await response;
      assert.equal(failed.statusCode, 502, failed.body);
      assert.equal(failed.json().code, "upstream_failed");
      assert.match(
        failed.json().detail,
        new RegExp(`host quiet did not answer the journal read within ${HOST_READ_WAIT_SECONDS}s`),
      );
      assert.equal(
        await embedded.answerRead({
          hostId: "quiet",
          id: order.id,
          outcome: "answered",
          content: "",
          truncated: false,
          detail: "late",
          refusal: null,
        }),
        "stale",
      );
      const [newest] = await operator.audit();
      assert.deepEqual([newest?.operation, newest?.outcome], ["operator.hosts.journal", "upstream_failed"]);
    });
  });
}
