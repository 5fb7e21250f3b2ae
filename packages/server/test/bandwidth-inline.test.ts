import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DIALECTS } from "@kiln/storage/testing";
import { appWithTenant, bearer, type TestApp } from "../src/testing/harness.js";
import { inlineFile, inlineSubmission } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";
import { archiveOf, Sources } from "./source-archives.js";

/** The harness clock starts at 2026-11-22T08:00:00Z; the bandwidth period is the UTC month. */
const NEXT_PERIOD = "2026-12-01T00:00:00.000Z";
const SECONDS_TO_NEXT_PERIOD = (Date.parse(NEXT_PERIOD) - Date.parse("2026-11-22T08:00:00.000Z")) / 1000;

/** An inline source of two files whose bytes are told apart by `tag`. */
const inlineFiles = (tag: string) => [
  inlineFile("Cargo.toml", `[package]\nname = "${tag}"\nversion = "0.1.0"\nedition = "2021"\n`),
  inlineFile("src/lib.rs", `pub fn ${tag}() -> &'static str { "${tag.repeat(12)}" }\n`),
];
const bytesOf = (files: { bytes: number[] }[]) => files.reduce((n, f) => n + f.bytes.length, 0);
const submission = (files: ReturnType<typeof inlineFiles>) =>
  inlineSubmission("acme/widget", "test", files, { invocation: { arguments: ["--workspace"] } });

interface UsageExportPage {
  uploads: { date: string; upload: string; repository: string; principal: string; bytes: number }[];
  totals: { bytes_uploaded: number } | null;
  next_cursor: string | null;
}

/**
 * An inline (schema_version 1) source's bytes are source bytes received, counted like a streamed
 * archive's uploaded parts: toward the operator's bandwidth allowance (the same `conflict` with
 * the retry time when they would pass it, refused before anything is kept) and toward usage's
 * bytes uploaded (an upload record named by the job), once per submission however often it is
 * replayed by its idempotency key.
 */
for (const dialect of DIALECTS) {
  describe(`bandwidth allowance at an inline submission (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let member: { tenant: string; token: string; userId: string };
    let operator: OperatorClient;
    let sources: Sources;

    before(async () => {
      ({ t, person: member } = await appWithTenant(dialect, { role: "member" }));
      operator = await operatorClient(t.app, t.storage, t.clock.now());
      sources = new Sources(t.app, member.token);
    });
    after(() => t.close());

    const submit = (files: ReturnType<typeof inlineFiles>, key: string) =>
      t.app.inject({
        method: "POST",
        url: "/api/v4/jobs",
        headers: { ...bearer(member.token), "content-type": "application/json", "idempotency-key": key },
        payload: JSON.stringify(submission(files)),
      });
    const controls = () => operator.tenantControls(member.tenant);
    const setAllowance = async (bytes: number) => {
      const res = await operator.changeTenantControls(member.tenant, { bandwidth_bytes_per_month: bytes });
      assert.equal(res.statusCode, 200, res.body);
    };
    const consumption = async () => {
      const res = await t.app.inject({ method: "GET", url: "/api/tenant/settings", headers: bearer(member.token) });
      return (res.json() as { limits: { bandwidth_bytes_per_month: { consumption: number } } }).limits
        .bandwidth_bytes_per_month.consumption;
    };
    const reportedUploaded = async (period: string) => {
      const res = await t.app.inject({
        method: "GET",
        url: `/api/usage?period=${period}`,
        headers: bearer(member.token),
      });
      assert.equal(res.statusCode, 200, res.body);
      return (res.json() as { totals: { bytes_uploaded: number } }).totals.bytes_uploaded;
    };
    /** Every upload record of the period's export, following next_cursor, and the export's totals. */
    const exported = async (period: string) => {
      const uploads: UsageExportPage["uploads"] = [];
      let totals: UsageExportPage["totals"] = null;
      let url = `/api/usage/export?period=${period}&limit=1`;
      for (;;) {
        const res = await t.app.inject({ method: "GET", url, headers: bearer(member.token) });
        assert.equal(res.statusCode, 200, res.body);
        const page = res.json() as UsageExportPage;
        uploads.push(...page.uploads);
        totals ??= page.totals;
        if (page.next_cursor === null) return { uploads, totals };
        url = `/api/usage/export?cursor=${page.next_cursor}&limit=1`;
      }
    };
    const jobCount = async () =>
      (
        (await t.app.inject({ method: "GET", url: "/api/jobs", headers: bearer(member.token) })).json() as {
          total: number;
        }
      ).total;

    const alpha = inlineFiles("alpha");
    const bravo = inlineFiles("bravo");
    const archive = archiveOf(
      [
        { path: "Cargo.toml", content: '[package]\nname = "charlie"\nversion = "0.1.0"\nedition = "2021"\n' },
        { path: "src/lib.rs", content: "pub fn charlie() {}\n" },
      ],
      [],
      { partBytes: 48 },
    );
    const firstPart = archive.parts[0] as Buffer;
    let alphaJob: string;

    it("an accepted inline source's bytes count toward the allowance and bytes uploaded, once however often it is replayed", async () => {
      await setAllowance(bytesOf(alpha) + bytesOf(bravo) - 1);
      // Two at once under one key, then a later replay: one job, its bytes counted once.
      const [first, racing] = await Promise.all([submit(alpha, "inline-alpha"), submit(alpha, "inline-alpha")]);
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(racing.statusCode, 200, racing.body);
      alphaJob = first.json() as string;
      assert.equal(racing.json(), alphaJob);
      const replay = await submit(alpha, "inline-alpha");
      assert.equal(replay.statusCode, 200, replay.body);
      assert.equal(replay.json(), alphaJob);

      assert.equal(await consumption(), bytesOf(alpha));
      assert.equal((await controls()).consumption.bandwidth_bytes_this_month, bytesOf(alpha));
      assert.equal(await reportedUploaded("2026-11"), bytesOf(alpha));
      const { uploads, totals } = await exported("2026-11");
      assert.deepEqual(uploads, [
        {
          date: "2026-11-22",
          upload: alphaJob,
          repository: "acme/widget",
          principal: member.userId,
          bytes: bytesOf(alpha),
          amount_cents: null,
        },
      ]);
      assert.equal(totals?.bytes_uploaded, bytesOf(alpha));
    });

    it("an inline source that would pass the allowance is refused conflict with the retry time, leaving no job and no count", async () => {
      const refused = await submit(bravo, "inline-bravo");
      assert.equal(refused.statusCode, 409, refused.body);
      const refusal = refused.json();
      assert.equal(refusal.code, "conflict");
      assert.equal(refusal.retry_after_seconds, SECONDS_TO_NEXT_PERIOD);
      assert.equal(refusal.reset_at, NEXT_PERIOD);
      assert.match(refusal.detail, /bandwidth allowance for 2026-11 is used/);
      assert.match(
        refusal.detail,
        new RegExp(`${bytesOf(alpha)} of ${bytesOf(alpha) + bytesOf(bravo) - 1} source bytes uploaded`),
      );
      assert.match(refusal.detail, new RegExp(`these ${bytesOf(bravo)} bytes would pass it`));
      assert.equal(await jobCount(), 1, "the refused submission made no job");
      assert.equal(await consumption(), bytesOf(alpha));
      assert.equal(await reportedUploaded("2026-11"), bytesOf(alpha));

      // The accepted submission's replay is still its job: a replay is neither refused nor counted.
      const replay = await submit(alpha, "inline-alpha");
      assert.equal(replay.statusCode, 200, replay.body);
      assert.equal(replay.json(), alphaJob);
      assert.equal(await consumption(), bytesOf(alpha));
    });

    it("inline bytes and uploaded parts share one allowance: a part is refused for what inline sources used", async () => {
      // Room for the first part beside alpha's inline bytes, not one byte more.
      await setAllowance(bytesOf(alpha) + firstPart.length - 1);
      assert.equal((await sources.reserve(archive.reservation, "inline-charlie")).status, 200);
      const refused = await sources.put("inline-charlie", 1, firstPart);
      assert.equal(refused.status, 409, refused.body);
      assert.equal(refused.json().code, "conflict");
      assert.match(refused.json().detail, new RegExp(`used: ${bytesOf(alpha)} of`));

      await setAllowance(bytesOf(alpha) + firstPart.length);
      assert.equal((await sources.put("inline-charlie", 1, firstPart)).status, 204);
      assert.equal(await consumption(), bytesOf(alpha) + firstPart.length);
      // The allowance is now used to the byte: an inline source of any bytes is refused.
      const over = await submit(bravo, "inline-bravo");
      assert.equal(over.statusCode, 409, over.body);
      assert.equal(over.json().reset_at, NEXT_PERIOD);
    });

    it("at the retry time the next month admits the refused submission and counts its bytes there", async () => {
      await t.clock.advance(SECONDS_TO_NEXT_PERIOD * 1000);
      assert.equal(await consumption(), 0);
      const accepted = await submit(bravo, "inline-bravo");
      assert.equal(accepted.statusCode, 200, accepted.body);
      assert.equal(await consumption(), bytesOf(bravo));
      assert.equal(await reportedUploaded("2026-12"), bytesOf(bravo));
      const december = await exported("2026-12");
      assert.deepEqual(
        december.uploads.map((u) => [u.date, u.upload, u.bytes]),
        [["2026-12-01", accepted.json(), bytesOf(bravo)]],
      );
      // November keeps what was received then: alpha's inline bytes and charlie's first part.
      assert.equal(await reportedUploaded("2026-11"), bytesOf(alpha) + firstPart.length);
      // Both on 2026-11-22, by upload: the upload key "inline-charlie" sorts before the job id "job_…".
      assert.deepEqual(
        (await exported("2026-11")).uploads.map((u) => [u.upload, u.bytes]),
        [
          ["inline-charlie", firstPart.length],
          [alphaJob, bytesOf(alpha)],
        ],
      );
    });
  });
}
