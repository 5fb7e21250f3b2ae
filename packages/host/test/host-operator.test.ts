import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { BareMetalApiError, BareMetalClient, fingerprintOf } from "../src/operator/bare-metal-client.js";
import { BareMetalRecoveryProvider } from "../src/operator/bare-metal-recovery-provider.js";
import { HostOperator } from "../src/operator/host-operator.js";
import type { HostOperatorClient } from "../src/operator/host-operator-client.js";

/**
 * The host operator's side of a recovery, and the bare-metal provider client's wire format:
 * the client is checked against a local HTTP server speaking the robot API's documented shape;
 * the control plane is a recording stand-in that answers as the real one does (its real side is
 * exercised with both in server/test/host-recovery*.test.ts).
 */

interface Robot {
  endpoint: string;
  requests: { method: string; path: string; authorization: string | undefined; body: string }[];
  status: string;
  close(): Promise<void>;
}

async function robot(): Promise<Robot> {
  const state: Robot = { endpoint: "", requests: [], status: "wedged", close: async () => {} };
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (c: Buffer) => {
      body += c.toString("utf8");
    });
    request.on("end", () => {
      state.requests.push({
        method: request.method ?? "",
        path: request.url ?? "",
        authorization: request.headers.authorization,
        body,
      });
      response.setHeader("content-type", "application/json");
      if (request.url === "/server/99") {
        response.end(JSON.stringify({ server: { server_number: 99, status: state.status } }));
      } else if (request.url === "/reset/404") {
        response.statusCode = 404;
        response.end(JSON.stringify({ error: { status: 404, code: "SERVER_NOT_FOUND", message: "Server not found" } }));
      } else {
        const [, resource] = (request.url ?? "").split("/");
        const wrapper = request.url?.endsWith("/rescue")
          ? "rescue"
          : request.url?.endsWith("/linux")
            ? "linux"
            : resource;
        response.end(JSON.stringify({ [wrapper ?? "x"]: { server_number: 99 } }));
      }
    });
  });
  server.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  state.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}

/** Answers as the control plane does: the recorded recovery, its ledger, approvals by step. */
function controlPlane(approved: Set<string>) {
  const calls: string[] = [];
  let steps: { position: number; step: string; state: string }[] = [];
  let claimed = false;
  let finished: string | null = null;
  const client: HostOperatorClient = {
    health: async () => {},
    readiness: async (r) => {
      calls.push(`readiness ${r.provider} ${r.providerServiceName} identity-readable=${r.providerIdentityReadable}`);
    },
    claimRecovery: async () => {
      if (finished !== null) return { recovery: null };
      claimed = true;
      return {
        recovery: { operation: "rec-1", incident: "inc-1", rescueRead: false, rescueSshPublicKey: null, steps },
      };
    },
    planRecovery: async (plan) => {
      steps = plan.steps.map((step, position) => ({ position, step, state: "pending" }));
    },
    beginStep: async (begin) => {
      const step = steps[begin.position]?.step ?? "";
      calls.push(`begin ${step}`);
      if (step === "reinstallation" && !approved.has(step)) return { answer: "await_approval", reason: "no approval" };
      return { answer: "proceed" };
    },
    endStep: async (end) => {
      calls.push(`end ${steps[end.position]?.step} ${end.outcome}`);
      steps = steps.map((s) => (s.position === end.position ? { ...s, state: end.outcome } : s));
    },
    finishRecovery: async (finish) => {
      finished = finish.outcome;
      calls.push(`finish ${finish.outcome}`);
    },
  };
  return { client, calls, claimed: () => claimed, finished: () => finished };
}

describe("host operator", () => {
  it("the bare-metal client speaks the robot API: basic auth, form bodies, wrapped answers, error documents", async () => {
    const r = await robot();
    try {
      const client = new BareMetalClient({ endpoint: r.endpoint, credential: async () => "robot:secret" });
      await client.reset("99");
      await client.armRescue(
        "99",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl test",
      );
      assert.equal(await client.status("99"), "wedged");
      await assert.rejects(
        client.reset("404"),
        (e: unknown) => e instanceof BareMetalApiError && e.code === "SERVER_NOT_FOUND",
      );
      const [reset, rescue] = r.requests;
      assert.equal(reset?.authorization, `Basic ${Buffer.from("robot:secret").toString("base64")}`);
      assert.deepEqual([reset?.method, reset?.path, reset?.body], ["POST", "/reset/99", "type=hw"]);
      assert.equal(rescue?.path, "/boot/99/rescue");
      assert.equal(
        new URLSearchParams(rescue?.body).get("authorized_key[]"),
        fingerprintOf("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"),
      );
    } finally {
      await r.close();
    }
  });

  it("runs the ledger on the host's side: a destructive step waits for its approval, then the run resumes where it stopped", async () => {
    const r = await robot();
    try {
      const approved = new Set<string>();
      const plane = controlPlane(approved);
      const client = new BareMetalClient({ endpoint: r.endpoint, credential: async () => "robot:secret" });
      const provider = new BareMetalRecoveryProvider({
        client,
        server: "99",
        serviceName: "kiln-host",
        installation: "server 99",
        dist: "Debian 12 base",
        identityReadable: async () => true,
        hostCameBack: async () => (await client.status("99")) === "ready",
      });
      const operator = new HostOperator({
        client: plane.client,
        hostId: "metal-9",
        instance: "op-1",
        environment: "test",
        provisioningBundle: Buffer.from("bundle"),
        provider,
        boot: "boot-1",
        clock: new ManualClock(),
        log: silentLogger,
      });
      await operator.runOnce();
      assert.deepEqual(plane.calls, [
        "readiness bare-metal kiln-host identity-readable=true",
        "begin reset",
        "end reset succeeded",
        "begin await_host",
        "end await_host failed",
        "begin reinstallation",
      ]);
      assert.equal(plane.finished(), null, "the recovery waits, unfinished");
      assert.equal(r.requests.filter((q) => q.path === "/boot/99/linux").length, 0);

      approved.add("reinstallation");
      plane.calls.length = 0;
      await operator.runOnce();
      assert.deepEqual(plane.calls, ["begin reinstallation", "end reinstallation succeeded", "finish succeeded"]);
      assert.deepEqual(
        r.requests.map((q) => q.path).slice(-2),
        ["/boot/99/linux", "/reset/99"],
        "reinstallation armed, then the server reset into it",
      );
    } finally {
      await r.close();
    }
  });

  it("skips the destructive step when the host came back, and records readiness once", async () => {
    const r = await robot();
    r.status = "ready";
    try {
      const plane = controlPlane(new Set());
      const client = new BareMetalClient({ endpoint: r.endpoint, credential: async () => "robot:secret" });
      const operator = new HostOperator({
        client: plane.client,
        hostId: "metal-9",
        instance: "op-1",
        environment: "test",
        provisioningBundle: Buffer.from("bundle"),
        provider: new BareMetalRecoveryProvider({
          client,
          server: "99",
          serviceName: "kiln-host",
          installation: null,
          dist: "Debian 12 base",
          identityReadable: async () => false,
          hostCameBack: async () => (await client.status("99")) === "ready",
        }),
        boot: "boot-1",
        clock: new ManualClock(),
        log: silentLogger,
      });
      await operator.runOnce();
      await operator.runOnce();
      assert.deepEqual(plane.calls, [
        "readiness bare-metal kiln-host identity-readable=false",
        "begin reset",
        "end reset succeeded",
        "begin await_host",
        "end await_host succeeded",
        "end reinstallation skipped",
        "finish succeeded",
      ]);
    } finally {
      await r.close();
    }
  });
});
