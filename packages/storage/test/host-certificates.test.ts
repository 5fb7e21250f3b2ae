import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  createHostEnrollmentToken,
  ensureCertificateAuthority,
  findHostEnrollmentToken,
  findIssuedCertificate,
  findListenerCertificate,
  type IssuedCertificateInput,
  listHostIdentityRecords,
  readCertificateAuthority,
  recordIssuedCertificate,
  redeemHostEnrollmentToken,
  renewHostCertificate,
  revokeHostCertificates,
  type Storage,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";
import { blockedOrSettled, held, withTwoStorages } from "./staged-transactions.js";

/**
 * The storage verbs of kiln's host CA and the certificates it issues (hosts/, migration 0023):
 * one CA per deployment, a bootstrap token redeemed for exactly one certificate, renewals over a
 * live certificate, revocation by host — and a renewal racing a revocation ordered, staged with
 * one transaction held open, never by timing. The certificates here are stand-in text: storage
 * keeps what the CA made and judges nothing by its content.
 */
const T0 = new Date("2026-11-24T07:00:00.000Z");
const at = (minutes: number) => new Date(T0.getTime() + minutes * 60_000);
let serials = 0;

function hostCertificate(hostId: string, minutes = 0, lifetimeMinutes = 60): IssuedCertificateInput {
  serials += 1;
  return {
    serial: `4${String(serials).padStart(31, "0")}`,
    role: "host",
    hostId,
    subject: `CN=${hostId}`,
    names: [],
    certificatePem: `certificate ${serials}`,
    certificateSha256: String(serials).padStart(64, "0"),
    sealedPrivateKey: null,
    issuedVia: "enrollment",
    enrollmentTokenHash: null,
    renewedFrom: null,
    notBefore: at(minutes).toISOString(),
    notAfter: at(minutes + lifetimeMinutes).toISOString(),
  };
}

async function tokenFor(storage: Storage, hostId: string, hash: string, ttlSeconds = 3600): Promise<string> {
  await createHostEnrollmentToken(storage, { tokenHash: hash, hostId, createdBy: "op", ttlSeconds, now: T0 });
  return hash;
}

for (const dialect of DIALECTS) {
  describe(`host certificates [${dialect.name}]`, { skip: dialect.skip }, () => {
    let storage: Storage;
    before(async () => {
      storage = await dialect.openFresh();
    });
    after(() => storage.close());

    it("one CA per deployment: the first stored wins, later candidates read it back", async () => {
      assert.equal(await readCertificateAuthority(storage), undefined);
      const first = { certificatePem: "ca one", certificateSha256: "a".repeat(64), sealedPrivateKey: "sealed one" };
      const second = { certificatePem: "ca two", certificateSha256: "b".repeat(64), sealedPrivateKey: "sealed two" };
      assert.deepEqual(await ensureCertificateAuthority(storage, { candidate: first, now: T0 }), {
        ...first,
        createdAt: T0.toISOString(),
      });
      assert.equal(
        (await ensureCertificateAuthority(storage, { candidate: second, now: at(1) })).certificatePem,
        "ca one",
      );
    });

    it("a bootstrap token is redeemed for exactly one certificate, and not once expired or unknown", async () => {
      const token = await tokenFor(storage, "builder-1", "1".repeat(64));
      assert.deepEqual(await findHostEnrollmentToken(storage, token), {
        hostId: "builder-1",
        expiresAt: at(60).toISOString(),
        redeemedAt: null,
      });
      const certificate = hostCertificate("builder-1");
      assert.deepEqual(await redeemHostEnrollmentToken(storage, { tokenHash: token, certificate, now: at(1) }), {
        kind: "issued",
        hostId: "builder-1",
      });
      const again = await redeemHostEnrollmentToken(storage, {
        tokenHash: token,
        certificate: hostCertificate("builder-1"),
        now: at(2),
      });
      assert.deepEqual(again, { kind: "redeemed", redeemedAt: at(1).toISOString() });
      const stored = await findIssuedCertificate(storage, certificate.serial);
      assert.equal(stored?.hostId, "builder-1");
      assert.equal(stored?.enrollmentTokenHash, token);
      assert.equal(stored?.issuedAt, at(1).toISOString());
      assert.equal(stored?.revokedAt, null);

      const late = await tokenFor(storage, "builder-2", "2".repeat(64), 60);
      assert.deepEqual(
        await redeemHostEnrollmentToken(storage, {
          tokenHash: late,
          certificate: hostCertificate("builder-2"),
          now: at(5),
        }),
        { kind: "expired", expiredAt: at(1).toISOString() },
      );
      assert.deepEqual(
        await redeemHostEnrollmentToken(storage, {
          tokenHash: "9".repeat(64),
          certificate: hostCertificate("builder-2"),
          now: at(5),
        }),
        { kind: "unknown" },
      );
      await assert.rejects(
        redeemHostEnrollmentToken(storage, {
          tokenHash: await tokenFor(storage, "builder-3", "3".repeat(64)),
          certificate: hostCertificate("someone-else"),
          now: at(1),
        }),
        /cannot redeem host builder-3's token/,
      );
    });

    it("renewal over a live certificate; revocation by host refuses further renewals; the inventory counts them", async () => {
      const token = await tokenFor(storage, "builder-4", "4".repeat(64));
      const first = hostCertificate("builder-4");
      await redeemHostEnrollmentToken(storage, { tokenHash: token, certificate: first, now: at(1) });
      const second = { ...hostCertificate("builder-4", 40), issuedVia: "renewal" as const };
      assert.deepEqual(
        await renewHostCertificate(storage, { renewedFrom: first.serial, certificate: second, now: at(40) }),
        {
          kind: "renewed",
        },
      );
      const renewed = await findIssuedCertificate(storage, second.serial);
      assert.equal(renewed?.renewedFrom, first.serial);
      assert.equal(renewed?.enrollmentTokenHash, token, "the chain keeps its enrollment");
      assert.deepEqual(
        await renewHostCertificate(storage, {
          renewedFrom: first.serial,
          certificate: hostCertificate("builder-1"),
          now: at(41),
        }),
        { kind: "unknown" },
        "a certificate renews only its own host",
      );

      let records = await listHostIdentityRecords(storage, { now: at(50) });
      let entry = records.hosts.find((h) => h.hostId === "builder-4");
      assert.equal(entry?.newest.serial, second.serial);
      assert.deepEqual([entry?.live, entry?.revoked], [2, 0]);
      records = await listHostIdentityRecords(storage, { now: at(70) });
      entry = records.hosts.find((h) => h.hostId === "builder-4");
      assert.deepEqual([entry?.live, entry?.revoked], [1, 0], "the first has expired");

      const revoked = await storage.transaction((trx) =>
        revokeHostCertificates(trx, { hostId: "builder-4", now: at(71), rowLocks: storage.capabilities.rowLocks }),
      );
      assert.equal(revoked, 2);
      assert.deepEqual(
        await renewHostCertificate(storage, {
          renewedFrom: second.serial,
          certificate: hostCertificate("builder-4", 72),
          now: at(72),
        }),
        { kind: "revoked", revokedAt: at(71).toISOString() },
      );
      entry = (await listHostIdentityRecords(storage, { now: at(72) })).hosts.find((h) => h.hostId === "builder-4");
      assert.deepEqual([entry?.live, entry?.revoked, entry?.newest.revokedAt], [0, 2, at(71).toISOString()]);
    });

    it("the host listener's certificate: the newest live one for exactly its names", async () => {
      const listener = (serial: string, names: string[], minutes: number): IssuedCertificateInput => ({
        ...hostCertificate("unused", minutes),
        serial,
        role: "listener",
        hostId: null,
        subject: "CN=kiln host listener",
        names,
        sealedPrivateKey: `sealed key ${serial}`,
        issuedVia: "listener",
      });
      await recordIssuedCertificate(storage, {
        certificate: listener("5A", ["kiln.test", "127.0.0.1"], 0),
        now: at(0),
      });
      await recordIssuedCertificate(storage, {
        certificate: listener("5B", ["kiln.test", "127.0.0.1"], 10),
        now: at(10),
      });
      await recordIssuedCertificate(storage, { certificate: listener("5C", ["other.test"], 10), now: at(10) });
      const found = await findListenerCertificate(storage, { names: ["kiln.test", "127.0.0.1"], now: at(20) });
      assert.equal(found?.serial, "5B");
      assert.equal(found?.sealedPrivateKey, "sealed key 5B");
      assert.deepEqual(found?.names, ["kiln.test", "127.0.0.1"]);
      assert.equal(await findListenerCertificate(storage, { names: ["kiln.test"], now: at(20) }), undefined);
      assert.equal(
        await findListenerCertificate(storage, { names: ["other.test"], now: at(80) }),
        undefined,
        "expired",
      );
      const records = await listHostIdentityRecords(storage, { now: at(20) });
      assert.deepEqual(records.listeners.map((l) => l.serial).sort(), ["5B", "5C"]);
      assert.ok(
        records.listeners.every((l) => !("sealedPrivateKey" in l)),
        "no key in the inventory's records",
      );
      const outstanding = records.outstandingEnrollments.map((e) => e.hostId);
      assert.ok(!outstanding.includes("builder-1"), "a redeemed token is not outstanding");
      assert.ok(outstanding.includes("builder-3"));
    });

    it("a revocation waits for a renewal in flight and then revokes its certificate too", async () => {
      await withTwoStorages(dialect, async (main, other) => {
        const token = await tokenFor(main, "racer", "6".repeat(64));
        const current = hostCertificate("racer");
        await redeemHostEnrollmentToken(main, { tokenHash: token, certificate: current, now: at(1) });
        const renewal = held(main);
        const next = { ...hostCertificate("racer", 40), issuedVia: "renewal" as const };
        const renewing = renewHostCertificate(renewal.storage, {
          renewedFrom: current.serial,
          certificate: next,
          now: at(40),
        });
        await renewal.ready;
        const revoking = other.transaction((trx) =>
          revokeHostCertificates(trx, { hostId: "racer", now: at(41), rowLocks: other.capabilities.rowLocks }),
        );
        assert.equal(await blockedOrSettled(other, revoking), "pending", "the revocation waits for the renewal");
        renewal.release();
        assert.deepEqual(await renewing, { kind: "renewed" });
        assert.equal(await revoking, 2, "the renewed certificate is revoked with the old one");
        assert.equal((await findIssuedCertificate(main, next.serial))?.revokedAt, at(41).toISOString());
      });
    });
  });
}
