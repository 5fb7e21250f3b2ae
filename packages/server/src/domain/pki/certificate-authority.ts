import { createHash, createPrivateKey, randomBytes, webcrypto, X509Certificate } from "node:crypto";

type CryptoKey = webcrypto.CryptoKey;

import { isIP } from "node:net";
import {
  type CertificateAuthorityRecord,
  ensureCertificateAuthority,
  type IssuedCertificateInput,
  readCertificateAuthority,
  type Storage,
} from "@kiln/storage";
import type { SecretBox } from "../secrets/secret-box.js";
import { KEY_ALGORITHM, x509 } from "./x509-library.js";

/** The CA's subject; a host's certificate names only its host id (CN). */
export const CA_SUBJECT = "CN=kiln host CA";
/** The host listener's server certificate's subject (its names are in subjectAltName). */
export const LISTENER_SUBJECT = "CN=kiln host listener";
/** How long the CA is valid: it signs short-lived certificates and has no rotation yet. */
const CA_LIFETIME_SECONDS = 10 * 365 * 24 * 3600;
/**
 * Certificates start this long before they are issued, so a host whose clock is a little behind
 * the control plane's does not find a fresh certificate not yet valid.
 */
const BACKDATE_SECONDS = 300;

/** Why a certificate signing request was not signed (refused `invalid_request` naming it). */
export class CertificateRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CertificateRequestError";
  }
}

/** SHA-256 of a certificate's DER, lower-case hexadecimal: the digest the inventory shows. */
export const certificateSha256 = (certificate: X509Certificate): string =>
  createHash("sha256").update(certificate.raw).digest("hex");

/** A random positive 128-bit serial, upper-case hexadecimal (as X509Certificate.serialNumber reads it). */
function newSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x40;
  return bytes.toString("hex").toUpperCase();
}

/** Whole seconds: X.509 times carry no fractions, and the stored window must equal the certificate's. */
const wholeSeconds = (ms: number) => new Date(Math.floor(ms / 1000) * 1000);

function windowFrom(now: Date, lifetimeSeconds: number): { notBefore: Date; notAfter: Date } {
  return {
    notBefore: wholeSeconds(now.getTime() - BACKDATE_SECONDS * 1000),
    notAfter: wholeSeconds(now.getTime() + lifetimeSeconds * 1000),
  };
}

const pemOfPkcs8 = (der: ArrayBuffer) =>
  createPrivateKey({ key: Buffer.from(der), format: "der", type: "pkcs8" })
    .export({ format: "pem", type: "pkcs8" })
    .toString();

const importSigningKey = (pem: string) =>
  webcrypto.subtle.importKey(
    "pkcs8",
    createPrivateKey(pem).export({ format: "der", type: "pkcs8" }),
    KEY_ALGORITHM,
    false,
    ["sign"],
  );

/**
 * The control plane's own certificate authority for remote hosts: a self-signed ECDSA P-256 CA
 * whose private key is kept in the database sealed under the master key (AES-256-GCM, SecretBox),
 * so every kiln-server of a deployment — which share KILN_MASTER_KEY — issues and verifies with
 * the same one. It signs hosts' short-lived client certificates (subject CN = the host id, from
 * the host's own certificate signing request: the host's key never leaves the host) and the host
 * listener's server certificate.
 */
export class CertificateAuthority {
  readonly certificate: X509Certificate;
  readonly certificateSha256: string;

  private constructor(
    readonly certificatePem: string,
    private readonly signingKey: CryptoKey,
    private readonly issuer: x509.X509Certificate,
  ) {
    this.certificate = new X509Certificate(certificatePem);
    this.certificateSha256 = certificateSha256(this.certificate);
  }

  /**
   * The deployment's CA, made and stored on first need. A key that does not open under this
   * server's master key is an error naming the cause (every server must share KILN_MASTER_KEY).
   */
  static async load(storage: Storage, secrets: SecretBox, now: Date): Promise<CertificateAuthority> {
    const record =
      (await readCertificateAuthority(storage)) ?? (await CertificateAuthority.create(storage, secrets, now));
    let keyPem: string;
    try {
      keyPem = secrets.open(record.sealedPrivateKey);
    } catch {
      throw new Error(
        "the host CA's private key does not open under this server's master key: every kiln-server of a deployment needs the same KILN_MASTER_KEY",
      );
    }
    return new CertificateAuthority(
      record.certificatePem,
      await importSigningKey(keyPem),
      new x509.X509Certificate(record.certificatePem),
    );
  }

  /** The stored CA, or undefined before any server needed one (the inventory reads it so). */
  static read(storage: Storage): Promise<CertificateAuthorityRecord | undefined> {
    return readCertificateAuthority(storage);
  }

  private static async create(storage: Storage, secrets: SecretBox, now: Date): Promise<CertificateAuthorityRecord> {
    const keys = await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"]);
    const { notBefore, notAfter } = windowFrom(now, CA_LIFETIME_SECONDS);
    const certificate = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: newSerial(),
      name: CA_SUBJECT,
      notBefore,
      notAfter,
      keys,
      signingAlgorithm: KEY_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    const pem = certificate.toString("pem");
    return ensureCertificateAuthority(storage, {
      candidate: {
        certificatePem: pem,
        certificateSha256: certificateSha256(new X509Certificate(pem)),
        sealedPrivateKey: secrets.seal(pemOfPkcs8(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey))),
      },
      now,
    });
  }

  /** Whether this CA signed `certificate` (its issuer name and signature). */
  issued(certificate: X509Certificate): boolean {
    return certificate.checkIssued(this.certificate) && certificate.verify(this.certificate.publicKey);
  }

  /**
   * A host's client certificate for the public key of its signing request. The request must be
   * a well-formed PKCS #10 request signed by its own key (proof the host holds it) for ECDSA
   * P-256; its subject is ignored: the certificate names the host the caller authenticated.
   */
  async issueHostCertificate(input: {
    hostId: string;
    csrPem: string;
    lifetimeSeconds: number;
    now: Date;
    via: "enrollment" | "renewal";
  }): Promise<IssuedCertificateInput> {
    let request: x509.Pkcs10CertificateRequest;
    try {
      request = new x509.Pkcs10CertificateRequest(input.csrPem);
    } catch {
      throw new CertificateRequestError("body.csr is not a PEM PKCS #10 certificate signing request");
    }
    const algorithm = request.publicKey.algorithm as webcrypto.EcKeyAlgorithm;
    if (algorithm.name !== "ECDSA" || algorithm.namedCurve !== "P-256") {
      throw new CertificateRequestError("body.csr must request an ECDSA P-256 key");
    }
    if (!(await request.verify())) {
      throw new CertificateRequestError("body.csr is not signed by the key it requests a certificate for");
    }
    const subject = `CN=${input.hostId}`;
    const { notBefore, notAfter } = windowFrom(input.now, input.lifetimeSeconds);
    const publicKey = await request.publicKey.export(KEY_ALGORITHM, ["verify"]);
    const certificate = await this.sign({
      subject,
      notBefore,
      notAfter,
      publicKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth], false),
      ],
    });
    return {
      serial: certificate.serialNumber,
      role: "host",
      hostId: input.hostId,
      subject,
      names: [],
      certificatePem: certificate.toString(),
      certificateSha256: certificateSha256(certificate),
      sealedPrivateKey: null,
      issuedVia: input.via,
      enrollmentTokenHash: null,
      renewedFrom: null,
      notBefore: notBefore.toISOString(),
      notAfter: notAfter.toISOString(),
    };
  }

  /**
   * A server certificate for the host listener under `names` (DNS names and IP addresses), with
   * a key made here; the key is answered in clear for the listener and sealed for storage.
   */
  async issueListenerCertificate(input: {
    names: readonly string[];
    lifetimeSeconds: number;
    now: Date;
    secrets: SecretBox;
  }): Promise<{ issued: IssuedCertificateInput; privateKeyPem: string }> {
    const keys = await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"]);
    const { notBefore, notAfter } = windowFrom(input.now, input.lifetimeSeconds);
    const certificate = await this.sign({
      subject: LISTENER_SUBJECT,
      notBefore,
      notAfter,
      publicKey: keys.publicKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
        new x509.SubjectAlternativeNameExtension(
          input.names.map((name) => ({ type: isIP(name) === 0 ? ("dns" as const) : ("ip" as const), value: name })),
          false,
        ),
      ],
    });
    const privateKeyPem = pemOfPkcs8(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
    return {
      privateKeyPem,
      issued: {
        serial: certificate.serialNumber,
        role: "listener",
        hostId: null,
        subject: LISTENER_SUBJECT,
        names: [...input.names],
        certificatePem: certificate.toString(),
        certificateSha256: certificateSha256(certificate),
        sealedPrivateKey: input.secrets.seal(privateKeyPem),
        issuedVia: "listener",
        enrollmentTokenHash: null,
        renewedFrom: null,
        notBefore: notBefore.toISOString(),
        notAfter: notAfter.toISOString(),
      },
    };
  }

  private async sign(input: {
    subject: string;
    notBefore: Date;
    notAfter: Date;
    publicKey: CryptoKey;
    extensions: x509.Extension[];
  }): Promise<X509Certificate> {
    const certificate = await x509.X509CertificateGenerator.create({
      serialNumber: newSerial(),
      subject: input.subject,
      issuer: this.issuer.subject,
      notBefore: input.notBefore,
      notAfter: input.notAfter,
      signingAlgorithm: KEY_ALGORITHM,
      publicKey: input.publicKey,
      signingKey: this.signingKey,
      extensions: [
        ...input.extensions,
        await x509.SubjectKeyIdentifierExtension.create(input.publicKey),
        await x509.AuthorityKeyIdentifierExtension.create(this.issuer, false),
      ],
    });
    return new X509Certificate(certificate.toString("pem"));
  }
}
