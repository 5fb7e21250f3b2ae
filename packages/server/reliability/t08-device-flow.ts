/**
 * T8 device flow, on SQLite and PostgreSQL, through the HTTP operations with the injected clock:
 *
 * - Guess odds. The user-code alphabet and length are read off the server's own normaliser
 *   (`normalizeUserCode`), the number of codes one address can hold pending is measured by
 *   starting as fast as device.start's limit admits over a whole code lifetime, and the odds of
 *   one guess are pending / codes. Then seeded random guesses are approved against those pending
 *   codes: a hit is counted (at these odds the chance of one in the whole run is below 10^-5).
 * - Limits. device.start past its limit in one second is rate_limited; device.poll past its limit
 *   is rate_limited; polls at seeded random gaps are compared, one by one, with RFC 8628's model
 *   (a poll sooner than the interval is `limited` and adds 5 s to the interval; expiry → expired).
 * - One token. Approved codes are polled by N concurrent requests each: exactly one `approved`
 *   answer with a token, exactly one cli_tokens row, the device row naming it, the token working,
 *   and every later poll `expired` without a token.
 *
 * Broken promises: odds above 2^-20 per guess, a hit, any answer differing from the model, a code
 * yielding zero or two tokens.
 */
import { redeemDeviceAuthorization } from "@kiln/storage";
import type { LightMyRequestResponse } from "fastify";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { signIn } from "../src/testing/sign-in.js";
import { hashSecret } from "../src/web/auth/session-secret.js";
import { DEVICE_LIFETIME_SECONDS, normalizeUserCode } from "../src/web/handlers/tenant/device.js";
import { PUBLIC_LIMITS } from "../src/web/http/enforce-security.js";
import { SeededRandom, trialSeed } from "./seeded-random.js";
import { count, runTrial, trialDialects } from "./trial.js";

const SEED = trialSeed("T8", 8);
const GUESSES = 1_000;
const CONCURRENT_CODES = 10;
const CONCURRENT_POLLS = 20;
const MODELLED_DEVICES = 6;

/** The user-code alphabet and length, read off the server's normaliser rather than copied. */
function userCodeSpace(): { alphabet: string; length: number } {
  const candidates = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const length = [...Array(64).keys()].find((n) => normalizeUserCode("B".repeat(n)) !== null);
  if (length === undefined) throw new Error("no length of B's is a user code");
  const alphabet = [...candidates].filter((c) => normalizeUserCode(c.repeat(length)) !== null).join("");
  return { alphabet, length };
}

interface Tally {
  guesses: number;
  hits: number;
  approveRateLimited: number;
  modelPolls: number;
  limitedPolls: number;
  modelMismatches: number;
  codesRaced: number;
  redemptionsRaced: number;
  redemptionWinners: number;
  racingPolls: number;
  tokensIssued: number;
  pendingPerAddress: number[];
  broken: string[];
}

const show = (res: LightMyRequestResponse) => `${res.statusCode} ${res.body.slice(0, 200)}`;

async function trialOn(t: TestApp, dialect: string, random: SeededRandom, tally: Tally): Promise<void> {
  const broken = (what: string) => tally.broken.push(`${dialect}: ${what}`);
  const start = (address: string) => t.app.inject({ method: "POST", url: "/api/device/start", remoteAddress: address });
  const poll = (deviceCode: string, address: string) =>
    t.app.inject({
      method: "GET",
      url: `/api/device/poll?device_code=${encodeURIComponent(deviceCode)}`,
      remoteAddress: address,
    });
  const started = async (address: string) => {
    const res = await start(address);
    if (res.statusCode !== 200) throw new Error(`device.start from ${address}: ${show(res)}`);
    return res.json() as { device_code: string; user_code: string; interval_seconds: number; expires_at: string };
  };

  const person = await personWithToken(t.storage, { role: "owner", now: t.clock.now() });
  const { email } = await t.storage.db
    .selectFrom("persons")
    .select("email")
    .where("id", "=", person.userId)
    .executeTakeFirstOrThrow();
  const session = await signIn(t.app, t.storage, email, undefined, t.clock);
  let keys = 0;
  const approve = (userCode: string) =>
    t.app.inject({
      method: "POST",
      url: `/api/device/approve?user_code=${encodeURIComponent(userCode)}`,
      headers: {
        cookie: `kiln_session=${session}`,
        origin: "http://kiln.test",
        "idempotency-key": `t8-${dialect}-${++keys}`,
      },
    });

  // ---- device.start's limit: one address, as fast as it admits, over one code lifetime.
  const flooder = "10.8.1.1";
  const startLimit = PUBLIC_LIMITS["device.start"] ?? Number.POSITIVE_INFINITY;
  const pending: string[] = [];
  let refusedStarts = 0;
  for (let second = 0; second < DEVICE_LIFETIME_SECONDS; second++) {
    for (;;) {
      const res = await start(flooder);
      if (res.statusCode === 429 && (res.json() as { code?: string }).code === "rate_limited") {
        refusedStarts += 1;
        break;
      }
      if (res.statusCode !== 200) {
        broken(`device.start under its limit answered ${show(res)}`);
        break;
      }
      pending.push((res.json() as { user_code: string }).user_code);
      if (pending.length > DEVICE_LIFETIME_SECONDS * startLimit) break;
    }
    await t.clock.advance(1000);
  }
  await t.clock.advance(-1000); // the last second at which the first code is still pending
  const live = await t.storage.db
    .selectFrom("device_authorizations")
    .select((e) => e.fn.countAll().as("n"))
    .where("state", "=", "pending")
    .where("requesting_host", "=", flooder)
    .where("expires_at", ">", t.clock.now().toISOString())
    .executeTakeFirstOrThrow();
  const pendingAtOnce = Number(live.n);
  tally.pendingPerAddress.push(pendingAtOnce);
  if (refusedStarts === 0) broken("device.start was never rate_limited for one address");

  // ---- guesses: seeded random user codes approved against the address's pending codes.
  const { alphabet, length } = userCodeSpace();
  const real = new Set(pending.map((c) => c.replace("-", "")));
  for (let i = 0; i < GUESSES; i++) {
    let guess = "";
    for (let k = 0; k < length; k++) guess += random.pick([...alphabet]);
    const res = await approve(`${guess.slice(0, 4)}-${guess.slice(4)}`);
    tally.guesses += 1;
    const code = (res.json() as { code?: string }).code;
    if (res.statusCode === 200) {
      tally.hits += 1;
      broken(`guess ${guess} approved a pending code${real.has(guess) ? "" : " (not one of the started codes!)"}`);
    } else if (res.statusCode === 429 && code === "rate_limited") {
      tally.approveRateLimited += 1;
    } else if (!(res.statusCode === 400 && code === "invalid_request")) {
      broken(`a wrong guess answered ${show(res)}`);
    }
  }
  await t.clock.advance((DEVICE_LIFETIME_SECONDS + 1) * 1000);

  // ---- device.poll's limit: one address past it in one second is rate_limited.
  const pollLimit = PUBLIC_LIMITS["device.poll"] ?? 0;
  const polled = await started("10.8.2.1");
  const answers = [];
  for (let i = 0; i <= pollLimit; i++) answers.push(await poll(polled.device_code, "10.8.2.1"));
  const refusedPolls = answers.filter((r) => r.statusCode === 429).length;
  if (refusedPolls !== 1 || answers[pollLimit]?.statusCode !== 429)
    broken(`${pollLimit + 1} polls in one second: ${refusedPolls} rate_limited, expected exactly the last one`);
  await t.clock.advance((DEVICE_LIFETIME_SECONDS + 61) * 1000);

  // ---- slow_down: polls at seeded random gaps against RFC 8628's model, until expiry.
  for (let d = 0; d < MODELLED_DEVICES; d++) {
    const address = `10.8.3.${d + 1}`;
    const device = await started(address);
    const expiresAt = Date.parse(device.expires_at);
    let interval = device.interval_seconds;
    let last: number | null = null;
    let expired = false;
    while (!expired) {
      const now = t.clock.now().getTime();
      const res = await poll(device.device_code, address);
      const got = res.json() as { state?: string; interval_seconds?: number; retry_after_seconds?: number };
      let expected: { state: string; interval_seconds?: number };
      if (expiresAt <= now) {
        expected = { state: "expired" };
        expired = true;
      } else if (last === null || now - last >= interval * 1000) {
        expected = { state: "pending", interval_seconds: interval };
        last = now;
      } else {
        interval += 5;
        expected = { state: "limited", interval_seconds: interval };
        last = now;
        tally.limitedPolls += 1;
        if (got.retry_after_seconds !== interval) {
          tally.modelMismatches += 1;
          broken(`limited poll: retry_after_seconds ${got.retry_after_seconds}, expected ${interval}`);
        }
      }
      tally.modelPolls += 1;
      if (
        res.statusCode !== 200 ||
        got.state !== expected.state ||
        got.interval_seconds !== expected.interval_seconds
      ) {
        tally.modelMismatches += 1;
        broken(`poll ${tally.modelPolls}: expected ${JSON.stringify(expected)}, got ${show(res)}`);
      }
      // Gaps around the interval, so both sides of it (and the exact boundary) are hit.
      await t.clock.advance(random.int(Math.max(0, interval - 3), interval + 2) * 1000);
    }
  }
  await t.clock.advance(61_000);

  // ---- one token: each approved code polled by N concurrent requests.
  const tokensBefore = await tokenRows(t, person.userId);
  let racedHere = 0;
  for (let c = 0; c < CONCURRENT_CODES; c++) {
    const address = `10.8.4.${c + 1}`;
    const device = await started(address);
    const approved = await approve(device.user_code);
    if (approved.statusCode !== 200) {
      broken(`approving a started code answered ${show(approved)}`);
      continue;
    }
    const racing = await Promise.all(Array.from({ length: CONCURRENT_POLLS }, () => poll(device.device_code, address)));
    tally.codesRaced += 1;
    racedHere += 1;
    tally.racingPolls += racing.length;
    const bodies = racing.map((r) => r.json() as { state?: string; token?: string });
    const withToken = bodies.filter((b) => b.token !== undefined);
    tally.tokensIssued += withToken.length;
    if (withToken.length !== 1 || bodies.filter((b) => b.state === "approved").length !== 1)
      broken(`${CONCURRENT_POLLS} concurrent polls of one approved code: ${withToken.length} tokens answered`);
    for (const r of racing)
      if (r.statusCode !== 200 || !["approved", "limited", "expired"].includes(String(r.json().state)))
        broken(`a racing poll answered ${show(r)}`);
    const row = await t.storage.db
      .selectFrom("device_authorizations")
      .select(["state", "cli_token_id"])
      .where("user_code", "=", device.user_code.replace("-", ""))
      .executeTakeFirstOrThrow();
    if (row.state !== "redeemed" || row.cli_token_id === null)
      broken(`after the race the device row is ${JSON.stringify(row)}`);
    const token = withToken[0]?.token;
    if (token !== undefined) {
      const identity = await t.app.inject({ method: "GET", url: "/api/identity", headers: bearer(token) });
      if (identity.statusCode !== 200 || identity.json().principal !== person.userId)
        broken(`the issued token does not identify its approver: ${show(identity)}`);
    }
    await t.clock.advance(60_000);
    const later = await poll(device.device_code, address);
    if (later.json().state !== "expired" || later.json().token !== undefined)
      broken(`a poll after redemption answered ${show(later)}`);
  }
  const issuedRows = (await tokenRows(t, person.userId)) - tokensBefore;

  // ---- the second guard alone: the poll's on-time check above lets one racer through, so the
  // redemption's conditional UPDATE is raced here directly, N transactions at once per code.
  for (let c = 0; c < CONCURRENT_CODES; c++) {
    const address = `10.8.5.${c + 1}`;
    const device = await started(address);
    if ((await approve(device.user_code)).statusCode !== 200) {
      broken("approving a started code for the redemption race failed");
      continue;
    }
    const deviceCodeHash = hashSecret(device.device_code);
    const won = await Promise.all(
      Array.from({ length: CONCURRENT_POLLS }, (_, i) =>
        t.storage.transaction((trx) => redeemDeviceAuthorization(trx, { deviceCodeHash, cliTokenId: `t8-racer-${i}` })),
      ),
    );
    tally.redemptionsRaced += 1;
    const winners = won.filter(Boolean).length;
    tally.redemptionWinners += winners;
    if (winners !== 1) broken(`${CONCURRENT_POLLS} concurrent redemptions of one approval: ${winners} won`);
  }
  if (issuedRows !== racedHere || racedHere !== CONCURRENT_CODES)
    broken(`${racedHere} approved codes left ${issuedRows} cli_tokens rows`);
}

async function tokenRows(t: TestApp, personId: string): Promise<number> {
  const row = await t.storage.db
    .selectFrom("cli_tokens")
    .select((e) => e.fn.countAll().as("n"))
    .where("person_id", "=", personId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

await runTrial("T8", "device flow", async () => {
  const random = new SeededRandom(SEED);
  const tally: Tally = {
    guesses: 0,
    hits: 0,
    approveRateLimited: 0,
    modelPolls: 0,
    limitedPolls: 0,
    modelMismatches: 0,
    codesRaced: 0,
    redemptionsRaced: 0,
    redemptionWinners: 0,
    racingPolls: 0,
    tokensIssued: 0,
    pendingPerAddress: [],
    broken: [],
  };
  const engines: string[] = [];
  for (const dialect of trialDialects()) {
    const t = await testApp(await dialect.openFresh());
    try {
      await trialOn(t, dialect.name, random, tally);
      engines.push(dialect.name);
    } finally {
      await t.close();
    }
  }
  const { alphabet, length } = userCodeSpace();
  const space = alphabet.length ** length;
  const pendingMax = Math.max(...tally.pendingPerAddress);
  const odds = Math.log2(pendingMax / space);
  if (odds > -20) tally.broken.push(`one guess hits with odds 2^${odds.toFixed(1)}, above 2^-20`);
  // How many codes may be pending in all (over every address) before one guess passes 2^-20.
  const pendingForBound = Math.floor(space / 2 ** 20);
  return {
    figure:
      `seed ${SEED} (${engines.join(" and ")}): user codes ${length} of ${alphabet.length} letters ` +
      `(2^${Math.log2(space).toFixed(1)}), at most ${count(pendingMax)} pending per address under ` +
      `device.start's limit → 2^${odds.toFixed(1)} per guess (2^-20 holds below ${count(pendingForBound)} ` +
      `pending in all); ${count(tally.guesses)} approve guesses, ${tally.hits} hits, ` +
      `${tally.approveRateLimited} rate_limited; ${count(tally.modelPolls)} polls at random gaps ` +
      `(${count(tally.limitedPolls)} too soon), ${tally.modelMismatches} differing from RFC 8628's slow_down ` +
      `model; ${tally.codesRaced} approved codes × ` +
      `${CONCURRENT_POLLS} concurrent polls: ${tally.tokensIssued} tokens issued (one per code); ` +
      `${tally.redemptionsRaced} approvals × ${CONCURRENT_POLLS} concurrent redemption transactions: ` +
      `${tally.redemptionWinners} won`,
    broken: tally.broken,
  };
});
