/**
 * Hostile input found by probing a running server (issue 22): each request here once got past
 * validation (or answered 503) and is now refused up front as a Refusal document naming the
 * field, with no job admitted.
 */
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, it } from "node:test";
import { CATALOGUE } from "@kiln/contract";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { inlineFile, inlineSubmission, listen } from "../src/testing/job-fixtures.js";
import { archiveOf, Sources } from "./source-archives.js";

const CRATE = [
  inlineFile("Cargo.toml", '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n'),
  inlineFile("src/lib.rs", "pub fn f() {}\n"),
];

const submission = (invocation: Record<string, unknown> = {}, files = CRATE) =>
  inlineSubmission("acme/widget", "test", files, { invocation });

/** Sends `request` as raw bytes and reads the whole answer until the server closes the connection. */
function rawExchange(base: string, request: string): Promise<{ status: number; headers: string; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const split = text.indexOf("\r\n\r\n");
      const head = text.slice(0, split);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), headers: head, body: text.slice(split + 4) });
    });
  });
}

const SUBMIT_LIMIT = (() => {
  const body = CATALOGUE.find((op) => op.id === "jobs.submit")?.request.body;
  assert.ok(body?.encoding === "json" && body.maxBytes !== undefined);
  return body.maxBytes;
})();

for (const dialect of DIALECTS) {
  describe(`hostile requests are refused up front (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let member: { tenant: string; token: string };
    let keys = 0;

    before(async () => {
      ({ t, person: member } = await appWithTenant(dialect, { role: "member" }));
    });
    after(() => t.close());

    const submitRaw = async (payload: string) => {
      keys += 1;
      const res = await t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(member.token), "content-type": "application/json", "idempotency-key": `hostile-${keys}` },
        payload,
      });
      return { status: res.statusCode, body: res.body, json: () => JSON.parse(res.body) };
    };
    const jobCount = async () =>
      Number(
        (
          await t.storage.db
            .selectFrom("jobs")
            .select((e) => e.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const assertRefused = (res: { status: number; body: string; json(): unknown }, detail: RegExp) => {
      assert.equal(res.status, 400, res.body.slice(0, 300));
      const doc = res.json() as { code: string; status: number; detail: string };
      assert.equal(doc.code, "invalid_request");
      assert.equal(doc.status, 400);
      assert.match(doc.detail, detail);
    };

    it("H2: jobs.submit takes an inline body up to its catalogued bound, and one byte more is invalid_request", async () => {
      assert.ok(SUBMIT_LIMIT <= 16 * 2 ** 20, `jobs.submit accepts ${SUBMIT_LIMIT} bytes`);
      const json = JSON.stringify(submission());
      // JSON allows trailing whitespace: pad a real submission to exactly the limit, then one past it.
      const atLimit = await submitRaw(json + " ".repeat(SUBMIT_LIMIT - Buffer.byteLength(json)));
      assert.equal(atLimit.status, 200, atLimit.body);
      const before = await jobCount();
      const over = await submitRaw(json + " ".repeat(SUBMIT_LIMIT - Buffer.byteLength(json) + 1));
      assertRefused(over, new RegExp(`body exceeds the ${SUBMIT_LIMIT} bytes`));
      assert.equal(await jobCount(), before);
    });

    it("M1: 10,000 levels of nesting inside invocation is invalid_request naming the body, not 503", async () => {
      const deep = `${"[".repeat(10_000)}${"]".repeat(10_000)}`;
      const json = JSON.stringify(submission({ extra: "PLACEHOLDER" })).replace('"PLACEHOLDER"', deep);
      assert.doesNotThrow(() => JSON.parse(json));
      const before = await jobCount();
      assertRefused(await submitRaw(json), /^body nests arrays and objects deeper than 64 levels/);
      // Brackets inside strings do not nest, and 64 levels are still accepted.
      const text = submission({ note: "[".repeat(10_000) });
      assert.equal((await submitRaw(JSON.stringify(text))).status, 200);
      const fine = JSON.stringify(submission({ extra: "PLACEHOLDER" })).replace(
        '"PLACEHOLDER"',
        `${'{"a":'.repeat(60)}1${"}".repeat(60)}`,
      );
      assert.equal((await submitRaw(fine)).status, 200);
      assert.equal(await jobCount(), before + 2);
    });

    it("M2: a path segment over 255 bytes, or a NUL in an argument or environment value, is refused naming the field", async () => {
      const before = await jobCount();
      const long = "a".repeat(256);
      assertRefused(
        await submitRaw(JSON.stringify(submission({}, [...CRATE, inlineFile(`src/${long}.rs`, "")]))),
        /^body\.workspace\.source\.files\[2\]\.path has a segment of 259 bytes/,
      );
      // Bytes of UTF-8, not characters: 86 three-byte characters are 258 bytes.
      assertRefused(
        await submitRaw(JSON.stringify(submission({}, [...CRATE, inlineFile(`src/${"€".repeat(86)}`, "")]))),
        /^body\.workspace\.source\.files\[2\]\.path has a segment of 258 bytes/,
      );
      assertRefused(
        await submitRaw(JSON.stringify(submission({ arguments: ["--workspace", "-p\u0000x"] }))),
        /^body\.workspace\.invocation\.arguments\[1\] contains a NUL byte/,
      );
      assertRefused(
        await submitRaw(JSON.stringify(submission({ environment: { RUST_LOG: "debug\u0000" } }))),
        /^body\.workspace\.invocation\.environment\.RUST_LOG contains a NUL byte/,
      );
      assertRefused(
        await submitRaw(JSON.stringify(submission({ artifacts: ["release/x\u0000"] }))),
        /^body\.workspace\.invocation\.artifacts\[0\] contains a NUL byte/,
      );
      // More than the host's argument space, though each value is within its schema.
      const environment = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`V${i}`, "x".repeat(32_000)]));
      assertRefused(
        await submitRaw(JSON.stringify(submission({ environment }))),
        /^body\.workspace\.invocation\.arguments and environment hold \d+ bytes together; at most 1048576/,
      );
      assert.equal(await jobCount(), before);
      const fine = await submitRaw(
        JSON.stringify(submission({}, [...CRATE, inlineFile(`src/${"z".repeat(252)}.rs`, "")])),
      );
      assert.equal(fine.status, 200, fine.body);
    });

    it("M2: a streamed archive with a path segment over 255 bytes is refused at sources.reserve", async () => {
      const sources = new Sources(t.app, member.token);
      const archive = archiveOf([
        { path: "Cargo.toml", content: "[package]\n" },
        { path: `src/${"b".repeat(300)}.rs`, content: "" },
      ]);
      const reserved = await sources.reserve(archive.reservation, "long-segment");
      assertRefused(reserved, /^body\.manifest\.entries\[1\]\.path has a segment of 303 bytes/);
    });

    it("L5: a path parameter too long for the router is the Refusal document, not Fastify's 414", async () => {
      const res = await t.app.inject({
        method: "GET",
        url: `/api/jobs/${"j".repeat(5000)}`,
        headers: bearer(member.token),
      });
      assertRefused(
        { status: res.statusCode, body: res.body, json: () => res.json() },
        /^path has a parameter longer than/,
      );
      assert.match(String(res.headers["content-type"]), /^application\/json/);
      // Within the router's bound, the parameter's own schema names it.
      const named = await t.app.inject({
        method: "GET",
        url: `/api/jobs/${"j".repeat(500)}`,
        headers: bearer(member.token),
      });
      assertRefused({ status: named.statusCode, body: named.body, json: () => named.json() }, /^path\.id /);
    });

    it("L5: headers over the server's limit, and malformed HTTP, are the Refusal document, not Fastify's 431/400", async () => {
      const base = await listen(t.app);
      // Over Node's 16 KiB default, yet small enough that the server reads it all in one go (so
      // closing the connection never resets it before the answer is read).
      const big = await rawExchange(
        base,
        `GET /api/identity HTTP/1.1\r\nhost: kiln.test\r\nx-filler: ${"a".repeat(20 * 1024)}\r\n\r\n`,
      );
      assert.equal(big.status, 400, big.headers);
      assert.match(big.headers, /content-type: application\/json/i);
      const doc = JSON.parse(big.body) as { code: string; status: number; detail: string };
      assert.deepEqual({ code: doc.code, status: doc.status }, { code: "invalid_request", status: 400 });
      assert.match(doc.detail, /^header/);
      const garbled = await rawExchange(base, "NOT HTTP AT ALL\r\n\r\n");
      assert.equal(garbled.status, 400, garbled.headers);
      assert.equal((JSON.parse(garbled.body) as { code: string }).code, "invalid_request");
    });
  });
}
