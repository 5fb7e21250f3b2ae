import { createHash, createPrivateKey, webcrypto, X509Certificate } from "node:crypto";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { Agent } from "node:https";
import { join } from "node:path";
import { type HostFetch, httpsFetch } from "./https-fetch.js";
import { KEY_ALGORITHM, x509 } from "./x509-library.js";

/** A host's TLS identity: its private key, its client certificate, and the CA it pins for the server. */
export interface HostTlsMaterial {
  readonly keyPem: string;
  readonly certificatePem: string;
  readonly caCertificatePem: string;
}

/** Where a kiln-host keeps its identity: `<data dir>/tls/`, readable by the host's user only. */
export interface HostTlsFiles {
  /** The private key and the certificate, one file so a renewal replaces both in one rename. */
  readonly identity: string;
  /** The pinned CA certificate. */
  readonly ca: string;
}

export const tlsFilesIn = (dataDir: string): HostTlsFiles => ({
  identity: join(dataDir, "tls", "host-identity.pem"),
  ca: join(dataDir, "tls", "kiln-ca.pem"),
});

/** SHA-256 of a PEM certificate's DER, lower-case hex (what `kiln-server admin host enrollment-token` prints for the CA). */
export const certificateSha256 = (pem: string): string =>
  createHash("sha256").update(new X509Certificate(pem).raw).digest("hex");

/** A fresh ECDSA P-256 key pair made on the host, and a signing request for it (the key never leaves). */
export async function newKeyAndSigningRequest(hostHint = "kiln-host"): Promise<{ keyPem: string; csrPem: string }> {
  const keys = await webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"]);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${hostHint}`,
    keys,
    signingAlgorithm: KEY_ALGORITHM,
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
  const keyPem = createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" })
    .export({ format: "pem", type: "pkcs8" })
    .toString();
  return { keyPem, csrPem: csr.toString("pem") };
}

const PEM_BLOCK = /-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----\n?/g;

function splitIdentityFile(text: string): { keyPem: string; certificatePem: string } {
  let keyPem: string | undefined;
  let certificatePem: string | undefined;
  for (const match of text.matchAll(PEM_BLOCK)) {
    if (match[1] === "PRIVATE KEY") keyPem = match[0];
    if (match[1] === "CERTIFICATE") certificatePem = match[0];
  }
  if (keyPem === undefined || certificatePem === undefined) {
    throw new Error("the host identity file must hold a PRIVATE KEY and a CERTIFICATE");
  }
  return { keyPem, certificatePem };
}

/** Writes `text` readable by this user only, replacing `path` in one rename (never a torn file). */
async function writePrivately(path: string, text: string): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode: 0o600 });
  await rename(temporary, path);
}

/**
 * The identity a kiln-host (and its host operator) speaks to the control plane with: the agent
 * for every request carries its key and certificate and trusts only the pinned CA (and the
 * control plane's name in the listener's certificate). A renewal replaces the material in place
 * — new requests use the new certificate, nothing restarts — and persists it; a second process
 * sharing the files (kiln-host-operator beside kiln-host) picks a renewal up at its next request.
 */
export class HostTlsIdentity {
  #material: HostTlsMaterial;
  #agent: Agent;
  #certificate: X509Certificate;
  #loadedMtimeMs = 0;

  private constructor(
    material: HostTlsMaterial,
    private readonly files: HostTlsFiles | null,
  ) {
    this.#material = material;
    this.#certificate = HostTlsIdentity.check(material);
    this.#agent = HostTlsIdentity.agentFor(material);
  }

  /** An identity held in memory only (tests, and the moment before it is first written). */
  static inMemory(material: HostTlsMaterial): HostTlsIdentity {
    return new HostTlsIdentity(material, null);
  }

  /** The identity kept in `files`, or undefined when there is none yet. */
  static async fromFiles(files: HostTlsFiles): Promise<HostTlsIdentity | undefined> {
    const read = (path: string) =>
      readFile(path, "utf8").catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return undefined;
        throw error;
      });
    const [identity, ca, status] = await Promise.all([
      read(files.identity),
      read(files.ca),
      stat(files.identity).catch(() => undefined),
    ]);
    if (identity === undefined || ca === undefined) return undefined;
    const loaded = new HostTlsIdentity({ ...splitIdentityFile(identity), caCertificatePem: ca }, files);
    loaded.#loadedMtimeMs = status?.mtimeMs ?? 0;
    return loaded;
  }

  /** Writes a new identity to `files` (key and certificate 0600, the pinned CA 0600) and answers it. */
  static async create(material: HostTlsMaterial, files: HostTlsFiles): Promise<HostTlsIdentity> {
    const identity = new HostTlsIdentity(material, files);
    await identity.persist();
    return identity;
  }

  /** The host id the certificate names (its CN). */
  get hostId(): string {
    const cn = /(?:^|\n)CN=([^\n]*)/.exec(this.#certificate.subject)?.[1];
    if (cn === undefined) throw new Error("the host certificate names no host");
    return cn;
  }

  get notBefore(): Date {
    return new Date(this.#certificate.validFrom);
  }

  get notAfter(): Date {
    return new Date(this.#certificate.validTo);
  }

  get serial(): string {
    return this.#certificate.serialNumber.toUpperCase();
  }

  get material(): HostTlsMaterial {
    return this.#material;
  }

  /** Requests as this identity (the current material at each request). */
  readonly fetch: HostFetch = async (url, init) => {
    await this.refreshFromFiles();
    return httpsFetch(() => this.#agent)(url, init);
  };

  /** Takes a renewed certificate (and its new key): persisted first, then used by every new request. */
  async replace(material: HostTlsMaterial): Promise<void> {
    const certificate = HostTlsIdentity.check(material);
    this.#material = material;
    this.#certificate = certificate;
    this.#agent = HostTlsIdentity.agentFor(material);
    await this.persist();
  }

  /** Re-reads the files when another process (the kiln-host beside a host operator) renewed them. */
  private async refreshFromFiles(): Promise<void> {
    if (this.files === null) return;
    const status = await stat(this.files.identity).catch(() => undefined);
    if (status === undefined || status.mtimeMs === this.#loadedMtimeMs) return;
    const material = {
      ...splitIdentityFile(await readFile(this.files.identity, "utf8")),
      caCertificatePem: await readFile(this.files.ca, "utf8"),
    };
    this.#certificate = HostTlsIdentity.check(material);
    this.#material = material;
    this.#agent = HostTlsIdentity.agentFor(material);
    this.#loadedMtimeMs = status.mtimeMs;
  }

  private async persist(): Promise<void> {
    if (this.files === null) return;
    await mkdir(join(this.files.identity, ".."), { recursive: true, mode: 0o700 });
    await writePrivately(this.files.ca, this.#material.caCertificatePem);
    await writePrivately(
      this.files.identity,
      `${this.#material.keyPem.trimEnd()}\n${this.#material.certificatePem.trimEnd()}\n`,
    );
    this.#loadedMtimeMs = (await stat(this.files.identity)).mtimeMs;
  }

  /** The certificate, checked to be for this key and issued by the pinned CA. */
  private static check(material: HostTlsMaterial): X509Certificate {
    const certificate = new X509Certificate(material.certificatePem);
    const ca = new X509Certificate(material.caCertificatePem);
    if (!certificate.checkPrivateKey(createPrivateKey(material.keyPem))) {
      throw new Error("the host certificate is not for the host's private key");
    }
    if (!certificate.checkIssued(ca) || !certificate.verify(ca.publicKey)) {
      throw new Error("the host certificate was not issued by the pinned kiln CA");
    }
    return certificate;
  }

  private static agentFor(material: HostTlsMaterial): Agent {
    return new Agent({
      key: material.keyPem,
      cert: material.certificatePem,
      ca: [material.caCertificatePem],
      keepAlive: true,
      minVersion: "TLSv1.2",
    });
  }
}
