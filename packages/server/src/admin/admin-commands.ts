import { REPOSITORY_PATTERN, ROLES, type Role, systemClock } from "@kiln/contract";
import { addPersonToTenant, createTenant, onboardRepository, type Storage } from "@kiln/storage";
import { Command, Option } from "commander";
import type { ServerConfig } from "../config.js";
import { ENROLLMENT_TOKEN_SECONDS, mintHostEnrollmentToken, revokeHost } from "../domain/hosts/host-identities.js";
import { CertificateAuthority } from "../domain/pki/certificate-authority.js";
import { SecretBox } from "../domain/secrets/secret-box.js";
import { masterKey, operatorCredential } from "../web/auth/operator-credential.js";
import { mintSignInLink } from "./mint-sign-in-link.js";

const TENANT_SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;
const EMAIL = /^[^\s@]+@[^\s@]+$/;

/** The server's configuration and a way to open its storage, resolved when a command runs. */
export type AdminContext = () => { config: ServerConfig; open: () => Promise<Storage> };

/** Prints a result as JSON (--json) or as one human line. */
function print(json: boolean, value: Record<string, unknown>, human: string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human}\n`);
}

async function withStorage<T>(context: AdminContext, fn: (storage: Storage) => Promise<T>): Promise<T> {
  const storage = await context().open();
  try {
    return await fn(storage);
  } finally {
    await storage.close();
  }
}

/**
 * `kiln-server admin …` (DESIGN.md §7): works against the same data dir or database
 * as the server and prints JSON with --json.
 */
export function adminCommand(open: AdminContext): Command {
  const admin = new Command("admin").description("administer tenants, people and repositories");

  const tenant = admin.command("tenant").description("tenants");
  tenant
    .command("create <tenant>")
    .description("create a tenant (a slug: lowercase letters, digits and dashes)")
    .option("--name <display-name>", "display name")
    .option("--json", "print JSON")
    .action(async (id: string, opts: { name?: string; json?: boolean }) => {
      if (!TENANT_SLUG.test(id)) throw new Error(`tenant must match ${TENANT_SLUG.source}, got ${JSON.stringify(id)}`);
      const { tenant: created, created: isNew } = await withStorage(open, (s) =>
        createTenant(s, { id, displayName: opts.name ?? id }, systemClock.now()),
      );
      print(
        opts.json === true,
        { tenant: created.id, display_name: created.displayName, created: isNew },
        isNew ? `tenant ${created.id} created` : `tenant ${created.id} already exists`,
      );
    });

  const user = admin.command("user").description("people");
  user
    .command("add <email>")
    .description("add a person to a tenant with a role (changes the role of an existing member)")
    .requiredOption("--tenant <tenant>", "tenant")
    .addOption(new Option("--role <role>", "role").choices([...ROLES]).makeOptionMandatory())
    .option("--name <name>", "display name")
    .option("--json", "print JSON")
    .action(async (email: string, opts: { tenant: string; role: Role; name?: string; json?: boolean }) => {
      if (!EMAIL.test(email)) throw new Error(`not an email address: ${JSON.stringify(email)}`);
      const added = await withStorage(open, (s) =>
        addPersonToTenant(
          s,
          {
            tenantId: opts.tenant,
            email,
            displayName: opts.name ?? email.split("@")[0] ?? email,
            role: opts.role,
          },
          systemClock.now(),
        ),
      );
      print(
        opts.json === true,
        { user_id: added.person.id, email: added.person.email, tenant: opts.tenant, role: added.membership.role },
        `${added.person.email} is ${added.membership.role} of ${opts.tenant} (user ${added.person.id})`,
      );
    });

  const repo = admin.command("repo").description("repositories");
  repo
    .command("onboard <repository>")
    .description("onboard owner/name for a tenant (for installs without a source-hosting app)")
    .requiredOption("--tenant <tenant>", "tenant")
    .option("--json", "print JSON")
    .action(async (repository: string, opts: { tenant: string; json?: boolean }) => {
      if (!new RegExp(REPOSITORY_PATTERN).test(repository)) {
        throw new Error(`repository must be owner/name, got ${JSON.stringify(repository)}`);
      }
      await withStorage(open, (s) =>
        onboardRepository(s, { tenantId: opts.tenant, name: repository, onboardedBy: "admin" }, systemClock.now()),
      );
      print(opts.json === true, { repository, tenant: opts.tenant }, `${repository} onboarded for ${opts.tenant}`);
    });
  admin
    .command("sign-in-link <email>")
    .description("print a one-time dashboard sign-in link for a person (valid 24 hours)")
    .option("--tenant <tenant>", "tenant to sign in to (default: the person's first)")
    .option("--json", "print JSON")
    .action(async (email: string, opts: { tenant?: string; json?: boolean }) => {
      const { config } = open();
      const origin = config.publicOrigin ?? "http://127.0.0.1:7860";
      const url = await withStorage(open, (s) => mintSignInLink(s, origin, email, opts.tenant));
      print(opts.json === true, { url }, url);
    });

  admin
    .command("operator-credential")
    .description("print the operator bootstrap credential (minting the first); --rotate replaces it")
    .option("--rotate", "mint a new credential; the previous one stops opening sessions")
    .option("--json", "print JSON")
    .action(async (opts: { rotate?: boolean; json?: boolean }) => {
      const { config } = open();
      const key = masterKey(config.dataDir);
      const credential = await withStorage(open, (s) =>
        operatorCredential(s, key, opts.rotate === true, systemClock.now()),
      );
      print(opts.json === true, { credential }, credential);
    });

  const host = admin.command("host").description("remote kiln-host machines");
  host
    .command("enrollment-token <host-id>")
    .description(
      "mint a one-time token a kiln-host redeems for its client certificate (KILN_HOST_ENROLLMENT_TOKEN); prints the host CA's SHA-256 to pin (KILN_HOST_CA_SHA256)",
    )
    .option("--expires-in-seconds <seconds>", "how long it may wait to be redeemed", String(ENROLLMENT_TOKEN_SECONDS))
    .option("--json", "print JSON")
    .action(async (hostId: string, opts: { expiresInSeconds: string; json?: boolean }) => {
      const ttlSeconds = Number(opts.expiresInSeconds);
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1)
        throw new Error("--expires-in-seconds must be a positive integer");
      const { config } = open();
      const secrets = new SecretBox(masterKey(config.dataDir));
      const { minted, ca } = await withStorage(open, async (s) => {
        const now = new Date();
        // The host pins this CA before it sends the token; made here if no server has made it yet.
        const ca = await CertificateAuthority.load(s, secrets, now);
        return { minted: await mintHostEnrollmentToken(s, { hostId, createdBy: "admin-cli", ttlSeconds, now }), ca };
      });
      print(
        opts.json === true,
        {
          host: minted.hostId,
          enrollment_token: minted.token,
          expires_at: minted.expiresAt,
          ca_sha256: ca.certificateSha256,
        },
        `${minted.token}\n  enrolls host ${minted.hostId} once, until ${minted.expiresAt}:\n  KILN_HOST_ENROLLMENT_TOKEN=… KILN_HOST_CA_SHA256=${ca.certificateSha256} kiln-host`,
      );
    });
  host
    .command("revoke <host-id>")
    .description("revoke every certificate of a host: its next request is refused")
    .option("--json", "print JSON")
    .action(async (hostId: string, opts: { json?: boolean }) => {
      const { revoked } = await withStorage(open, (s) =>
        revokeHost(s, { hostId, revokedBy: "admin-cli", now: new Date() }),
      );
      print(opts.json === true, { host: hostId, revoked }, `${revoked} certificate(s) of host ${hostId} revoked`);
    });
  return admin;
}
