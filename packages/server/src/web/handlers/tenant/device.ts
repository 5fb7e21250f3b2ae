import { randomInt } from "node:crypto";
import {
  appendAuditEntry,
  approveDeviceAuthorization,
  findDeviceAuthorization,
  issueCliToken,
  recordDevicePoll,
  redeemDeviceAuthorization,
  startDeviceAuthorization,
} from "@kiln/storage";
import { hashToken, mintToken } from "../../../domain/identity/token-format.js";
import { refuse } from "../../../domain/refusal.js";
import { hashSecret, mintSecret } from "../../auth/session-secret.js";
import { type Handler, principalOf } from "../../http/handler.js";

/**
 * RFC 8628 device authorization. User codes are 8 letters from 20 consonants (no
 * vowels, so no words; no look-alikes such as I/1 or O/0): 20^8 ≈ 2^34.6, far beyond
 * what guessing within the ten-minute life and the public rate limit can reach.
 */
const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
const USER_CODE_SHAPE = /^[BCDFGHJKLMNPQRSTVWXZ]{8}$/;
export const DEVICE_LIFETIME_SECONDS = 600;
export const DEVICE_INTERVAL_SECONDS = 5;

/** `wdjb-mjht`, `WDJB MJHT` → `WDJBMJHT`; null when it cannot be a user code. */
export function normalizeUserCode(value: string): string | null {
  const code = value.toUpperCase().replace(/[\s-]/g, "");
  return USER_CODE_SHAPE.test(code) ? code : null;
}

const display = (code: string) => `${code.slice(0, 4)}-${code.slice(4)}`;

function mintUserCode(): string {
  let code = "";
  for (let i = 0; i < 8; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

export const startDevice: Handler<"device.start"> = async (ctx) => {
  const deviceCode = mintSecret();
  const expiresAt = new Date(ctx.now.getTime() + DEVICE_LIFETIME_SECONDS * 1000);
  const requestingHost = ctx.request.ip;
  for (let attempt = 0; attempt < 5; attempt++) {
    const userCode = mintUserCode();
    const started = await startDeviceAuthorization(
      ctx.db,
      {
        deviceCodeHash: hashSecret(deviceCode),
        userCode,
        requestingHost,
        intervalSeconds: DEVICE_INTERVAL_SECONDS,
        expiresAt,
      },
      ctx.clock.now(),
    );
    if (started) {
      return {
        device_code: deviceCode,
        user_code: display(userCode),
        verification_uri: `${ctx.deps.publicOrigin}/device?user_code=${display(userCode)}`,
        expires_at: expiresAt.toISOString(),
        interval_seconds: DEVICE_INTERVAL_SECONDS,
        requesting_host: requestingHost,
      };
    }
  }
  return refuse("unavailable", "could not allocate a user code; retry", { retry_after_seconds: 1 });
};

/**
 * Unknown, expired and already-redeemed device codes all answer `expired`: the poll
 * never tells a guesser which codes exist, and a redeemed code never yields its token
 * twice.
 */
export const pollDevice: Handler<"device.poll"> = async (ctx) => {
  const deviceCodeHash = hashSecret(ctx.query.device_code);
  const found = await findDeviceAuthorization(ctx.db, { deviceCodeHash });
  const nowText = ctx.now.toISOString();
  if (found === undefined || found.state === "redeemed" || found.expires_at <= nowText) return { state: "expired" };
  const earliestOnTime = new Date(ctx.now.getTime() - found.interval_seconds * 1000);
  if ((await recordDevicePoll(ctx.db, { deviceCodeHash, now: ctx.now, earliestOnTime })) === "too_fast") {
    const slower = found.interval_seconds + 5;
    return { state: "limited", interval_seconds: slower, retry_after_seconds: slower, expires_at: found.expires_at };
  }
  if (found.state === "pending") {
    return { state: "pending", interval_seconds: found.interval_seconds, expires_at: found.expires_at };
  }
  const tenantId = found.approved_tenant_id;
  const personId = found.approved_by;
  if (tenantId === null || personId === null) throw new Error("approved device authorization without its approver");
  const token = mintToken("cli");
  // The token insert and the redemption commit together: a poll that loses the race to
  // redeem rolls back its token, so exactly one token is ever issued per approval.
  const issued = await ctx.deps.storage
    .transaction(async (trx) => {
      const { id } = await issueCliToken(
        trx,
        { tenantId, personId, tokenHash: hashToken(token), requestingHost: found.requesting_host },
        ctx.clock.now(),
      );
      if (!(await redeemDeviceAuthorization(trx, { deviceCodeHash, cliTokenId: id }))) {
        throw new LostRedemption();
      }
      await appendAuditEntry(
        trx,
        {
          tenantId,
          actor: personId,
          target: `cli-token:${id}`,
          value: `issued to ${found.requesting_host} by device approval`,
        },
        ctx.clock.now(),
      );
      return true;
    })
    .catch((error: unknown) => {
      if (error instanceof LostRedemption) return false;
      throw error;
    });
  return issued ? { state: "approved", token } : { state: "expired" };
};

class LostRedemption extends Error {}

export const pendingDevice: Handler<"device.pending"> = async (ctx) => {
  const userCode = normalizeUserCode(ctx.query.user_code);
  if (userCode === null) return null;
  const found = await findDeviceAuthorization(ctx.db, { userCode });
  if (found === undefined || found.state !== "pending" || found.expires_at <= ctx.now.toISOString()) return null;
  return { user_code: display(found.user_code), requesting_host: found.requesting_host, expires_at: found.expires_at };
};

export const approveDevice: Handler<"device.approve"> = async (ctx) => {
  const person = principalOf(ctx);
  const userCode = normalizeUserCode(ctx.query.user_code);
  const approved =
    userCode !== null &&
    (await approveDeviceAuthorization(
      ctx.db,
      { userCode, tenantId: person.tenantId, personId: person.principal },
      ctx.clock.now(),
    ));
  if (!approved || userCode === null) {
    return refuse(
      "invalid_request",
      "query.user_code names no pending device authorization (unknown, expired or already approved)",
    );
  }
  await appendAuditEntry(
    ctx.db,
    { tenantId: person.tenantId, actor: person.principal, target: `device:${display(userCode)}`, value: "approved" },
    ctx.clock.now(),
  );
  return { user_code: display(userCode), approved_by: person.principal };
};
