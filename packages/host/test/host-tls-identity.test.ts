import assert from "node:assert/strict";
import { webcrypto, X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { TLSSocket } from "node:tls";
import { renewalDueAt } from "../src/remote/certificate-renewal.js";
import {
  HostTlsIdentity,
  type HostTlsMaterial,
  newKeyAndSigningRequest,
  tlsFilesIn,
} from "../src/remote/host-tls-identity.js";
import { KEY_ALGORITHM, x509 } from "../src/remote/x509-library.js";

/**
 * The kiln-host's TLS identity on its own (the control plane's side is in the server's
 * remote-host tests): a stand-in CA made here signs the host's requests, and a real HTTPS server
 * on 127.0.0.1 asking for client certificates answers with the serial each request presented.
 */
type CertificateAuthorityForTest = { certificatePem: string; sign: (csrPem: string, cn: string) => Promise<string> };

async function certificateAuthority(): Promise<CertificateAuthorityForTest> {
  const keys = await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=test CA",
    notBefore: new Date(Date.now() - 3600_000),
    notAfter: new Date(Date.now() + 86400_000),
    keys,
    signingAlgorithm: KEY_ALGORITHM,
    extensions: [new x509.BasicConstraintsExtension(true, 0, true)],
  });
  let serial = 0x40;
  return {
    certificatePem: ca.toString("pem"),
    sign: async (csrPem, cn) => {
      serial += 1;
      const request = new x509.Pkcs10CertificateRequest(csrPem);
      const names = [{ type: "ip" as const, value: "127.0.0.1" }];
      const certificate = await x509.X509CertificateGenerator.create({
        serialNumber: serial.toString(16),
        subject: `CN=${cn}`,
        issuer: ca.subject,
        notBefore: new Date(Date.now() - 3600_000),
        notAfter: new Date(Date.now() + 3 * 3600_000),
        signingAlgorithm: KEY_ALGORITHM,
        publicKey: await request.publicKey.export(KEY_ALGORITHM, ["verify"]),
        signingKey: keys.privateKey,
        extensions: [new x509.SubjectAlternativeNameExtension(names)],
      });
      return certificate.toString("pem");
    },
  };
}

async function materialFor(ca: CertificateAuthorityForTest, cn: string): Promise<HostTlsMaterial> {
  const { keyPem, csrPem } = await newKeyAndSigningRequest(cn);
  return { keyPem, certificatePem: await ca.sign(csrPem, cn), caCertificatePem: ca.certificatePem };
}

describe("a kiln-host's TLS identity", () => {
  let ca: CertificateAuthorityForTest;
  let server: Server;
  let origin: string;
  let dir: string;

  before(async () => {
    ca = await certificateAuthority();
    const serverMaterial = await materialFor(ca, "control plane");
    server = createServer(
      {
        key: serverMaterial.keyPem,
        cert: serverMaterial.certificatePem,
        ca: [ca.certificatePem],
        requestCert: true,
        rejectUnauthorized: false,
      },
      (request, response) => {
        const presented = (request.socket as TLSSocket).getPeerX509Certificate();
        response.end(presented === undefined ? "none" : presented.serialNumber);
      },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address !== null && typeof address === "object");
    origin = `https://127.0.0.1:${address.port}`;
    dir = await mkdtemp(join(tmpdir(), "kiln-host-tls-"));
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  const serialOf = (pem: string) => new X509Certificate(pem).serialNumber;

  it("is kept readable by the host's user only, names its host, and presents its certificate to a server it verifies by the pinned CA", async () => {
    const files = tlsFilesIn(dir);
    const material = await materialFor(ca, "builder-1");
    const identity = await HostTlsIdentity.create(material, files);
    assert.equal(identity.hostId, "builder-1");
    for (const path of [files.identity, files.ca]) assert.equal((await stat(path)).mode & 0o777, 0o600, path);
    assert.equal((await stat(join(dir, "tls"))).mode & 0o777, 0o700);
    assert.equal(await readFile(files.ca, "utf8"), ca.certificatePem);
    const kept = await HostTlsIdentity.fromFiles(files);
    assert.equal(kept?.serial, identity.serial);
    assert.equal(await (await identity.fetch(`${origin}/`)).text(), serialOf(material.certificatePem));
    assert.equal(await HostTlsIdentity.fromFiles(tlsFilesIn(join(dir, "elsewhere"))), undefined);
  });

  it("a renewal is used by the next request without a restart, and a second process sharing the files takes it up", async () => {
    const files = tlsFilesIn(dir);
    const renewing = await HostTlsIdentity.create(await materialFor(ca, "builder-2"), files);
    const sharing = await HostTlsIdentity.fromFiles(files);
    assert.ok(sharing !== undefined);
    assert.equal(await (await sharing.fetch(`${origin}/`)).text(), renewing.serial);
    const renewed = await materialFor(ca, "builder-2");
    await renewing.replace(renewed);
    assert.equal(renewing.serial, serialOf(renewed.certificatePem));
    assert.equal(await (await renewing.fetch(`${origin}/`)).text(), renewing.serial);
    assert.equal(await (await sharing.fetch(`${origin}/`)).text(), renewing.serial, "read again from the files");
  });

  it("refuses a certificate for another key or from another CA, and renews at two thirds of the lifetime", async () => {
    const mine = await materialFor(ca, "builder-3");
    const other = await materialFor(ca, "builder-3");
    assert.throws(() => HostTlsIdentity.inMemory({ ...mine, keyPem: other.keyPem }), /not for the host's private key/);
    const foreign = await certificateAuthority();
    assert.throws(
      () => HostTlsIdentity.inMemory({ ...mine, caCertificatePem: foreign.certificatePem }),
      /not issued by the pinned kiln CA/,
    );
    const start = new Date("2026-11-24T00:00:00.000Z");
    const due = renewalDueAt({ notBefore: start, notAfter: new Date(start.getTime() + 9 * 3600_000) });
    assert.equal(due.toISOString(), "2026-11-24T06:00:00.000Z");
  });
});
