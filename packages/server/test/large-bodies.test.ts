/**
 * Large bodies off the event loop (issue 22 H2, reliability trial T15): a JSON body above
 * LARGE_BODY_BYTES of jobs.submit or sources.reserve is parsed, checked and prepared by a body
 * worker. Its answers must be exactly those of the same body read on the event loop — the same
 * job or upload, the same idempotency identity (a replay through either path finds the other's),
 * the same refusal naming the same field — and one tenant's large requests in flight are bounded.
 */
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, it } from "node:test";
import { systemClock } from "@kiln/contract";
import { onboardRepository, readJob, readJobManifest } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../src/build-app.js";
import { readSourceFile, type SourceManifestEntry } from "../src/domain/jobs/source-manifest.js";
import { bearer, personWithToken, type TestApp } from "../src/testing/harness.js";
import { eventually, inlineSubmission, listen } from "../src/testing/job-fixtures.js";
import { type LargeBodies, largeBodiesOf } from "../src/web/http/body-parsers.js";
import { LARGE_BODY_BYTES } from "../src/web/http/body-preparations.js";
import { BodyWorkerPool } from "../src/web/http/body-worker-pool.js";
import { archiveOf } from "./source-archives.js";
import { type WorkerAndLoopApps, workerAndLoopApps } from "./worker-and-loop-apps.js";

const REPOSITORY = "acme/widget";
const file = (path: string, bytes: number[]) => ({ path, bytes, executable: false });
/** Bytes enough to make a body large: 100,000 small integers are about 300 KB of JSON. */
const bulk = Array.from({ length: 100_000 }, (_, i) => (i * 7) % 256);

const submission = (
  files = [file("Cargo.toml", [...Buffer.from('[package]\nname = "demo"\n')]), file("src/big.rs", bulk)],
) => inlineSubmission(REPOSITORY, "test", files);

const manifest = (count: number) =>
  archiveOf(
    Array.from({ length: count }, (_, i) => ({
      path: `src/m${String(i).padStart(5, "0")}/f.rs`,
      content: `// ${i}\n`,
    })),
    [],
    { repository: REPOSITORY },
  ).reservation as { manifest: { entries: { path: string }[] }; totals: { entries: number } };

interface Answer {
  status: number;
  body: string;
}

async function post(app: FastifyInstance, token: string, url: string, payload: string, key: string): Promise<Answer> {
  const res = await app.inject({
    method: "POST",
    url,
    headers: { ...bearer(token), "content-type": "application/json", "idempotency-key": key },
    payload,
  });
  return { status: res.statusCode, body: res.body };
}

for (const dialect of DIALECTS) {
  describe(`large bodies are read off the event loop, answered as on it (${dialect.name})`, {
    skip: dialect.skip,
  }, () => {
    let t: TestApp;
    let large: LargeBodies;
    /** The same service doing everything on its event loop. */
    let onLoop: FastifyInstance;
    let member: { tenant: string; token: string };
    let keys = 0;
    const key = () => `large-${++keys}`;
    let apps: WorkerAndLoopApps;

    before(async () => {
      apps = await workerAndLoopApps(await dialect.openFresh(), REPOSITORY);
      ({ t, large, onLoop, member } = apps);
    });
    after(() => apps.close());

    /** Sends `payload` to both, each under a fresh key; asserts the worker read it and both answered alike. */
    async function bothAnswer(url: string, payload: string): Promise<Answer> {
      assert.ok(
        Buffer.byteLength(payload) > LARGE_BODY_BYTES,
        `a body of ${Buffer.byteLength(payload)} bytes is not large`,
      );
      const read = large.pool?.bodiesRead ?? 0;
      const viaWorker = await post(t.app, member.token, url, payload, key());
      assert.equal(large.pool?.bodiesRead, read + 1, "the body worker did not read the body");
      const viaLoop = await post(onLoop, member.token, url, payload, key());
      assert.equal(
        viaWorker.status,
        viaLoop.status,
        `worker: ${viaWorker.body.slice(0, 300)}\nloop: ${viaLoop.body.slice(0, 300)}`,
      );
      if (viaWorker.status !== 200) assert.deepEqual(JSON.parse(viaWorker.body), JSON.parse(viaLoop.body));
      return viaWorker;
    }

    it("jobs.submit: a large inline source is admitted with its bytes stored, and a replay through the event loop finds the job", async () => {
      const body = JSON.stringify(submission());
      const submitKey = key();
      const first = await post(t.app, member.token, "/api/v4/jobs", body, submitKey);
      assert.equal(first.status, 200, first.body);
      const jobId = JSON.parse(first.body) as string;
      // The same key and body, read on the event loop: the same submission, so the same job.
      const replay = await post(onLoop, member.token, "/api/v4/jobs", body, submitKey);
      assert.deepEqual([replay.status, JSON.parse(replay.body)], [200, jobId]);
      // A changed body under the key, read by the worker, is conflict.
      const changed = JSON.stringify(
        submission([file("Cargo.toml", [...Buffer.from("[package]\n")]), file("src/big.rs", [...bulk, 1])]),
      );
      const conflict = await post(t.app, member.token, "/api/v4/jobs", changed, submitKey);
      assert.equal(conflict.status, 409, conflict.body);
      assert.equal((JSON.parse(conflict.body) as { code: string }).code, "conflict");

      const record = await readJob(t.storage.db, { tenantId: member.tenant, jobId });
      assert.ok(record !== undefined);
      const entries = JSON.parse((await readJobManifest(t.storage, jobId)) ?? "null") as SourceManifestEntry[];
      const big = entries.find((entry) => entry.path === "src/big.rs");
      assert.ok(big !== undefined);
      assert.deepEqual([...(await readSourceFile(t.deps.blobs, big))], bulk);

      // The same body read on the event loop, under another key, has the same identity.
      const other = await post(onLoop, member.token, "/api/v4/jobs", body, key());
      const otherRecord = await readJob(t.storage.db, {
        tenantId: member.tenant,
        jobId: JSON.parse(other.body) as string,
      });
      assert.equal(otherRecord?.job.request_hash, record.job.request_hash);
    });

    it("jobs.submit: every refusal of a large body is the event loop's, naming the same field", async () => {
      const base = submission();
      const cases: [string, string][] = [];
      const variant = (what: string, change: (body: ReturnType<typeof submission>) => unknown) => {
        const body = structuredClone(base);
        cases.push([what, JSON.stringify(change(body) ?? body)]);
      };
      variant("a byte past 255 deep in the bulk", (b) => {
        (b.workspace.source.files[1] as { bytes: number[] }).bytes[90_000] = 256;
      });
      variant("a byte that is not an integer", (b) => {
        (b.workspace.source.files[1] as { bytes: unknown[] }).bytes[5] = 1.5;
      });
      variant("a byte that is text", (b) => {
        (b.workspace.source.files[1] as { bytes: unknown[] }).bytes[99_999] = "a";
      });
      variant("a NUL in a path", (b) => {
        (b.workspace.source.files[1] as { path: string }).path = "src/\u0000.rs";
      });
      variant("files out of order (the inline rules)", (b) => {
        b.workspace.source.files.reverse();
      });
      variant("a number past 2^53 in the invocation", (b) => ({
        ...b,
        workspace: { ...b.workspace, invocation: { ...b.workspace.invocation, timeout: 1e300 } },
      }));
      variant("a missing member", (b) => ({ ...b, size: undefined }));
      variant("a member the record does not have", (b) => ({ ...b, extra: true }));
      variant("a repository of the wrong form", (b) => ({ ...b, repository: `bad repo ${"x".repeat(300)}` }));
      variant("schema_version 2 with inline files", (b) => ({ ...b, schema_version: 2 }));
      const text = JSON.stringify(base);
      cases.push(["a __proto__ member", text.replace('{"schema_version"', '{"__proto__":{"x":1},"schema_version"')]);
      cases.push(["text that is not JSON", text.slice(0, -1)]);
      cases.push([
        "nesting past 64 levels",
        text.replace('"arguments":[]', `"arguments":${"[".repeat(70)}${"]".repeat(70)}`),
      ]);
      cases.push(["only whitespace", " ".repeat(LARGE_BODY_BYTES + 1)]);
      cases.push(["null", `null${" ".repeat(LARGE_BODY_BYTES)}`]);
      for (const [what, payload] of cases) {
        const answer = await bothAnswer("/api/v4/jobs", payload);
        assert.notEqual(answer.status, 200, `${what} was admitted`);
        assert.equal((JSON.parse(answer.body) as { code: string }).code, "invalid_request", `${what}: ${answer.body}`);
      }
      // The refusals name the field, as they did before the worker.
      const named = await bothAnswer("/api/v4/jobs", cases[0]?.[1] ?? "");
      assert.match(JSON.parse(named.body).detail, /^body\.workspace\.source\.files\[1\]\.bytes\[90000\] /);
      const rules = await bothAnswer("/api/v4/jobs", cases[4]?.[1] ?? "");
      assert.match(JSON.parse(rules.body).detail, /^body\.workspace\.source\.files\[1\]\.path is out of order/);
    });

    it("sources.reserve: a large manifest is reserved as on the event loop, and its refusals are the same", async () => {
      const reservation = manifest(3000);
      const payload = JSON.stringify(reservation);
      const uploadKey = `upload-${key()}`;
      const reserved = await post(t.app, member.token, "/api/sources", payload, uploadKey);
      assert.equal(reserved.status, 200, reserved.body);
      // The same key and body through the event loop: the same upload, not a conflict.
      const again = await post(onLoop, member.token, "/api/sources", payload, uploadKey);
      assert.equal(again.status, 200, again.body);
      assert.deepEqual(JSON.parse(again.body), JSON.parse(reserved.body));

      const outOfOrder = structuredClone(reservation);
      outOfOrder.manifest.entries.reverse();
      const refused = await bothAnswer("/api/sources", JSON.stringify(outOfOrder));
      assert.equal(refused.status, 400);
      assert.match(JSON.parse(refused.body).detail, /^body\.manifest\.entries\[1\]\.path .* is out of order/);
      const miscounted = structuredClone(reservation);
      miscounted.totals.entries += 1;
      const totals = await bothAnswer("/api/sources", JSON.stringify(miscounted));
      assert.match(JSON.parse(totals.body).detail, /^body\.totals\.entries is 3001; the manifest implies 3000/);
    });

    it("one tenant's large requests in flight are bounded: the next is rate_limited; another tenant's and small ones are not", async () => {
      const bounded = largeBodiesOf({ bodyWorkers: 1, largeRequestsPerTenant: 1, clock: systemClock });
      const app = buildApp({ ...t.deps, largeBodies: bounded });
      const other = await personWithToken(t.storage, { role: "member" });
      await onboardRepository(
        t.storage,
        { tenantId: other.tenant, name: REPOSITORY, onboardedBy: "test" },
        t.clock.now(),
      );
      try {
        const base = await listen(app);
        const body = JSON.stringify(submission());
        // A large submission whose body never finishes arriving: admitted, and in flight.
        const url = new URL(base);
        const socket = connect(Number(url.port), url.hostname);
        socket.on("error", () => {});
        socket.write(
          `POST /api/v4/jobs HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${member.token}\r\n` +
            `content-type: application/json\r\nidempotency-key: ${key()}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 1000)}`,
        );
        await eventually(() => bounded.admission.inFlight(member.tenant) === 1);

        const refused = await post(app, member.token, "/api/v4/jobs", body, key());
        assert.equal(refused.status, 429, refused.body);
        const doc = JSON.parse(refused.body) as { code: string; retry_after_seconds: number; reset_at: string };
        assert.equal(doc.code, "rate_limited");
        assert.equal(doc.retry_after_seconds, 1);
        assert.ok(Date.parse(doc.reset_at) > 0);
        // Another tenant's large body, and this tenant's small one, are not held by it.
        assert.equal((await post(app, other.token, "/api/v4/jobs", body, key())).status, 200);
        const small = JSON.stringify(submission([file("Cargo.toml", [...Buffer.from("[package]\n")])]));
        assert.equal((await post(app, member.token, "/api/v4/jobs", small, key())).status, 200);

        // Once the first has gone, the tenant's next large request is admitted.
        socket.destroy();
        await eventually(() => bounded.admission.inFlight(member.tenant) === 0);
        assert.equal((await post(app, member.token, "/api/v4/jobs", body, key())).status, 200);
      } finally {
        await app.close();
        await bounded.pool?.close();
      }
    });
  });
}

describe("the body worker pool", () => {
  it("takes tenants in turn: a tenant's backlog does not hold another tenant's body behind all of it", async () => {
    const pool = new BodyWorkerPool(1);
    try {
      const order: string[] = [];
      const body = Buffer.from(JSON.stringify(manifest(10)));
      const read = (tenant: string, name: string) =>
        pool.read(tenant, "sources.reserve", Buffer.from(body)).then((answer) => {
          assert.equal(answer.kind, "valid");
          order.push(name);
        });
      // All four wait for the one worker to start, so the turn order decides.
      await Promise.all([read("a", "a1"), read("a", "a2"), read("a", "a3"), read("b", "b1")]);
      assert.deepEqual(order, ["a1", "b1", "a2", "a3"]);
    } finally {
      await pool.close();
    }
  });

  it("answers failed for an operation without a body preparation, and keeps serving", async () => {
    const pool = new BodyWorkerPool(1);
    try {
      const failed = await pool.read("a", "jobs.get", Buffer.from("{}"));
      assert.equal(failed.kind, "failed");
      const valid = await pool.read("a", "sources.reserve", Buffer.from(JSON.stringify(manifest(3))));
      assert.equal(valid.kind, "valid");
    } finally {
      await pool.close();
    }
  });
});
