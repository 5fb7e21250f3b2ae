import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addPersonToTenant, appendLogRecords, createTenant, type LogLine, readLogRecords } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { searchJobLog } from "../src/domain/jobs/search-job-log.js";
import {
  type AttemptLease,
  acceptJob,
  claimJob,
  finishJob,
  type JobsTestApp,
  jobsTestApp,
} from "../src/testing/job-fixtures.js";
import { signIn } from "../src/testing/sign-in.js";

let tenants = 0;
const BIG_LOG_LINES = 20_000;
/** Line 5,432 is on the log's sixth page (1,000 lines a page); cargo coloured the word apart. */
const NEEDLE_LINE = 5432;
const NEEDLE_TEXT = "thread 'main' \u001b[1;31mpanicked\u001b[0m at the needle: <script>alert(1)</script>";

async function append(t: JobsTestApp, lease: AttemptLease, lines: readonly Omit<LogLine, "at">[]): Promise<void> {
  const at = t.clock.now();
  for (let from = 0; from < lines.length; from += 2000) {
    const accepted = await appendLogRecords(t.storage, {
      ...lease,
      lines: lines.slice(from, from + 2000).map((l) => ({ ...l, at })),
    });
    assert.equal(accepted, true);
  }
}

/** A finished cargo test's log: kiln's preamble, two test binaries (one failing), cargo's verdict, kiln's epilogue. */
const SMALL_LOG: Omit<LogLine, "at">[] = [
  { stream: "system", text: "kiln: network policy offline: no dependency gateway" },
  {
    stream: "system",
    text: "kiln: cargo test --message-format=json-render-diagnostics --color=always (toolchain 1.85.0)",
  },
  { stream: "stderr", text: "\u001b[1m\u001b[32m   Compiling\u001b[0m widget v0.1.0" },
  {
    stream: "stderr",
    text: "\u001b[1m\u001b[32m     Running\u001b[0m unittests src/lib.rs (target/debug/deps/widget-1)",
  },
  { stream: "stdout", text: "test tests::adds ... ok" },
  { stream: "stdout", text: "test result: ok. 1 passed; 0 failed; 0 ignored" },
  { stream: "stderr", text: "\u001b[1m\u001b[32m     Running\u001b[0m tests/it.rs (target/debug/deps/it-2)" },
  { stream: "stdout", text: "test parses ... FAILED" },
  { stream: "stdout", text: "thread 'parses' panicked at tests/it.rs:4:5:" },
  { stream: "stdout", text: "test result: FAILED. 0 passed; 1 failed; 0 ignored" },
  { stream: "stderr", text: "error: test failed, to rerun pass `--test it`" },
  { stream: "system", text: "kiln: cargo exited with 101 after 1.2 s" },
  { stream: "system", text: "kiln: sandbox: peak memory 120 MiB" },
  { stream: "system", text: "kiln: sandbox: cgroup removed" },
];

for (const dialect of DIALECTS) {
  describe(`the job page's log viewer (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: JobsTestApp;
    let cookie: string;
    let tenant: string;
    let big: string;
    let small: string;
    let running: string;

    before(async () => {
      t = await jobsTestApp(await dialect.openFresh());
      tenants += 1;
      tenant = `logview${process.pid}x${tenants}`;
      await createTenant(t.storage, { id: tenant, displayName: `Tenant ${tenant}` }, t.clock.now());
      await addPersonToTenant(
        t.storage,
        { tenantId: tenant, email: `viewer@${tenant}.example`, role: "viewer" },
        t.clock.now(),
      );
      cookie = await signIn(t.app, t.storage, `viewer@${tenant}.example`, undefined, t.clock);

      const bigJob = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      const bigLease = await claimJob(t.storage, bigJob.id, t.clock.now());
      await append(
        t,
        bigLease,
        Array.from({ length: BIG_LOG_LINES }, (_, i) => ({
          stream: i % 7 === 3 ? ("stderr" as const) : ("stdout" as const),
          text: i + 1 === NEEDLE_LINE ? NEEDLE_TEXT : `line ${i + 1} of the noisy test's output`,
        })),
      );
      await finishJob(t.storage, t.blobs, bigLease, { now: t.clock.now(), outcome: "failed" });
      big = bigJob.id;

      const smallJob = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      const smallLease = await claimJob(t.storage, smallJob.id, t.clock.now());
      await append(t, smallLease, SMALL_LOG);
      await finishJob(t.storage, t.blobs, smallLease, { now: t.clock.now(), outcome: "failed" });
      small = smallJob.id;

      // A job still running: its first binary done, its second under way.
      const runningJob = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      const runningLease = await claimJob(t.storage, runningJob.id, t.clock.now());
      await append(t, runningLease, SMALL_LOG.slice(0, 8));
      running = runningJob.id;
    });
    after(() => t.close());

    const get = (url: string) => t.app.inject({ method: "GET", url, cookies: { kiln_session: cookie } });

    it("search finds a line on page 6 of a 20,000-line log, links it and opens its page with the hit marked", async () => {
      const query = "the NEEDLE: <script>";
      const res = await get(`/jobs/${big}?log_search=${encodeURIComponent(query)}`);
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.body, /id="log-search-summary">1 line contains “the NEEDLE: &lt;script&gt;”/);
      const link = `/jobs/${big}?log_line=${NEEDLE_LINE}&amp;log_search=${encodeURIComponent(query)}#L${NEEDLE_LINE}`;
      assert.ok(
        res.body.includes(`<a class="search-hit" href="${link}">line ${NEEDLE_LINE}</a>`),
        "the hit links its line",
      );
      // The page shown is the hit's: lines 5,001 to 6,000.
      assert.ok(res.body.includes('id="L5001"') && res.body.includes('id="L6000"'), "page 6 shown");
      assert.ok(!res.body.includes('id="L1"') && !res.body.includes('id="L6001"'));
      const line = res.body.slice(
        res.body.indexOf(`id="L${NEEDLE_LINE}"`) - 30,
        res.body.indexOf(`id="L${NEEDLE_LINE + 1}"`),
      );
      assert.match(line, /class="line stdout hit"/);
      assert.ok(line.includes("at <mark>the needle: &lt;script&gt;</mark>alert(1)&lt;/script&gt;"), line);
      assert.ok(!res.body.includes("<script>alert(1)"), "the log's markup stays text");

      // The link itself opens the same page at the line.
      const opened = await get(link.replaceAll("&amp;", "&"));
      assert.ok(opened.body.includes(`id="L${NEEDLE_LINE}"`));
    });

    it("jobs.logs_search answers across the whole log, ignoring case and colour codes, and continues from its cursor", async () => {
      const search = async (query: string) => {
        const res = await get(`/api/jobs/${big}/logs/search?${query}`);
        assert.equal(res.statusCode, 200, res.body);
        return res.json() as {
          matches: { sequence: number; text: string }[];
          next_cursor: string | null;
          searched_to: number;
        };
      };
      const one = await search("q=panicked+AT+THE");
      assert.deepEqual(
        one.matches.map((m) => m.sequence),
        [NEEDLE_LINE],
      );
      assert.equal(one.matches[0]?.text, NEEDLE_TEXT, "the line as stored");
      assert.equal(one.next_cursor, null);
      assert.equal(one.searched_to, BIG_LOG_LINES);

      // "line 1999 " is line 1999's alone; "line 1999" also lines 19990–19999, found on from the cursor.
      const first = await search("q=line+1999+&limit=1");
      assert.deepEqual(
        first.matches.map((m) => m.sequence),
        [1999],
      );
      assert.ok(first.next_cursor !== null);
      const rest = await search(`q=line+1999&limit=500&cursor=${first.next_cursor}`);
      assert.deepEqual(
        rest.matches.map((m) => m.sequence),
        [19990, 19991, 19992, 19993, 19994, 19995, 19996, 19997, 19998, 19999],
      );
      assert.equal((await search("q=not+in+this+log")).matches.length, 0);
      const refused = await get(`/api/jobs/${big}/logs/search?q=`);
      assert.equal(refused.statusCode, 400, "an empty query is refused");
      const long = await get(`/api/jobs/${big}/logs/search?q=${"x".repeat(201)}`);
      assert.equal(long.statusCode, 400, "a query over 200 characters is refused before any line is read");
      assert.match(long.body, /"code":"invalid_request"/);
      assert.equal((await get(`/api/jobs/job_nosuch/logs/search?q=x`)).statusCode, 404);
    });

    it("a search stops after its line budget, saying where, and goes on from there", async () => {
      const job = { tenantId: tenant, jobId: big };
      const partial = await searchJobLog(t.storage.db, job, {
        query: "panicked at",
        afterSequence: 0,
        limit: 100,
        linesPerAnswer: 3000,
      });
      assert.deepEqual(partial, { matches: [], searchedTo: 3000, more: true });
      const rest = await searchJobLog(t.storage.db, job, { query: "panicked at", afterSequence: 3000, limit: 100 });
      assert.deepEqual(
        rest.matches.map((m) => m.sequence),
        [NEEDLE_LINE],
      );
      assert.equal(rest.more, false);
    });

    it("the raw download is the stored log byte for byte; the evidence downloads as the API's JSON", async () => {
      const res = await get(`/jobs/${big}/log.txt`);
      assert.equal(res.statusCode, 200, res.body.slice(0, 500));
      assert.match(res.headers["content-type"] as string, /^text\/plain; charset=utf-8/);
      assert.equal(res.headers["content-disposition"], `attachment; filename="${big}.log.txt"`);
      const { records } = await readLogRecords(t.storage, { jobId: big, afterSequence: 0, limit: BIG_LOG_LINES + 10 });
      assert.equal(records.length, BIG_LOG_LINES);
      const stored = Buffer.from(records.map((r) => `${r.text}\n`).join(""), "utf8");
      assert.ok(res.rawPayload.equals(stored), "equal byte for byte");

      const evidence = await get(`/jobs/${small}/evidence.json`);
      assert.equal(evidence.statusCode, 200);
      assert.match(evidence.headers["content-disposition"] as string, /attachment; filename=".*\.evidence\.json"/);
      const document = evidence.json() as { job: { id: string; status: string }; report: { phases: unknown[] } };
      assert.equal(document.job.id, small);
      assert.equal(document.job.status, "failed");
      assert.ok(Array.isArray(document.report.phases));
      assert.equal((await get("/jobs/job_nosuch/log.txt")).statusCode, 404);
    });

    it("numbers each line as a permalink, keeps its time behind the toggle, colours ANSI as classes and marks stderr", async () => {
      const res = await get(`/jobs/${small}`);
      assert.equal(res.statusCode, 200);
      const { records } = await readLogRecords(t.storage, { jobId: small, afterSequence: 0, limit: 100 });
      const compiling = records[2];
      assert.ok(compiling !== undefined);
      assert.ok(
        res.body.includes(
          `<span class="line stderr" id="L${compiling.sequence}"><a class="seq" href="#L${compiling.sequence}">`,
        ),
      );
      assert.ok(res.body.includes(`<time class="ts" datetime="${compiling.at}">`), "the line's time");
      assert.match(
        res.body,
        /<input type="checkbox" id="log-times"><label class="log-toggle" for="log-times"> Timestamps/,
      );
      assert.ok(res.body.includes('<span class="ansi-bold ansi-fg-2">   Compiling</span> widget v0.1.0'));
      assert.ok(!res.body.includes("\u001b"), "no raw escape reaches the page");
      const last = records.at(-1)?.sequence;
      assert.ok(
        res.body.includes(
          `<a id="log-end" href="/jobs/${small}?log_line=${last}#L${last}">Jump to the end (line ${last})</a>`,
        ),
      );
      assert.ok(res.body.includes(`<a id="log-raw" href="/jobs/${small}/log.txt" download>`));
      assert.ok(res.body.includes(`<a id="evidence-json" href="/jobs/${small}/evidence.json" download>`));
    });

    it("a running job shows its live log first: the step now, an elapsed timer, each finished binary, no empty sections", async () => {
      const res = await get(`/jobs/${running}`);
      assert.equal(res.statusCode, 200, res.body);
      const at = (marker: string) => {
        const index = res.body.indexOf(marker);
        assert.ok(index > 0, `the page shows ${marker}`);
        return index;
      };
      assert.ok(at('id="live"') < at('id="log-lines"'), "the status panel, then the log");
      assert.ok(at('id="log-lines"') < at('id="job-details"'), "what else is known below the log");
      assert.match(res.body, /<div id="live-status" role="status" aria-live="polite">/);
      assert.match(res.body, /<strong>Now:<\/strong> <span id="live-step">testing tests\/it\.rs<\/span>/);
      assert.match(res.body, /Running for <span id="live-elapsed" data-since="[^"]+">/);
      assert.match(
        res.body,
        /<ol id="live-tests" class="live-tests"><li class="binary-ok"><span class="mono">unittests src\/lib\.rs<\/span>: ok\. 1 passed; 0 failed; 0 ignored<\/li><\/ol>/,
      );
      assert.ok(!res.body.includes("No crates reported"), "no empty sections");
      assert.ok(!res.body.includes('id="part-tests"'));
      assert.match(res.body, /data-follow="true"/);
      // The timer is outside the live region (it would be read out each second).
      assert.ok(at('id="live-elapsed"') < at('id="live-status"'));

      // Once it ended, the evidence is above the log again and the panel is gone.
      const done = await get(`/jobs/${small}`);
      assert.ok(!done.body.includes('id="live"') && !done.body.includes('id="job-details"'));
      assert.ok(done.body.indexOf('id="part-tests"') < done.body.indexOf('id="log-lines"'));
    });

    it("folds kiln's own lines and each test binary's section; a failing binary's section stays open", async () => {
      const res = await get(`/jobs/${small}`);
      const folds = [...res.body.matchAll(/<details class="fold ([a-z- ]+)"( open)?>/g)].map(
        (m) => `${m[1]}${m[2] ?? ""}`,
      );
      assert.deepEqual(folds, ["fold-kiln", "fold-binary", "fold-binary fold-failed open", "fold-kiln"]);
      assert.match(res.body, /kiln · 2 lines of the service's own/);
      assert.match(res.body, /kiln · 3 lines of the service's own/);
      assert.match(res.body, /<span class="fold-verdict">test result: ok\. 1 passed; 0 failed; 0 ignored<\/span>/);
      // Cargo's verdict after the binaries is not folded into the last one.
      const verdict = res.body.indexOf("error: test failed, to rerun pass");
      assert.ok(verdict > res.body.lastIndexOf("</details>", verdict), "outside the binary's fold");

      // A line asked for opens its fold.
      const { records } = await readLogRecords(t.storage, { jobId: small, afterSequence: 0, limit: 100 });
      const epilogue = records.at(-1)?.sequence;
      const opened = await get(`/jobs/${small}?log_line=${epilogue}`);
      assert.match(
        opened.body,
        /<details class="fold fold-kiln" open><summary><span class="fold-title">kiln · 3 lines/,
      );
    });
  });
}
