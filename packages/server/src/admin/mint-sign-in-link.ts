import { type Clock, systemClock } from "@kiln/contract";
import { createSignInLink, findPersonByEmail, listMembershipsOfPerson, type Storage } from "@kiln/storage";
import { hashSecret, mintSecret } from "../web/auth/session-secret.js";

export const SIGN_IN_LINK_SECONDS = 24 * 3600;

/**
 * A one-time link that signs the person in to a tenant they belong to (their only or
 * first tenant unless named). Only the link token's digest is stored.
 */
export async function mintSignInLink(
  storage: Storage,
  publicOrigin: string,
  email: string,
  tenant?: string,
  clock: Pick<Clock, "now"> = systemClock,
): Promise<string> {
  const person = await findPersonByEmail(storage, email);
  if (person === undefined) throw new Error(`no person with email ${email}`);
  const memberships = await listMembershipsOfPerson(storage, person.id);
  const membership = tenant === undefined ? memberships[0] : memberships.find((m) => m.tenantId === tenant);
  if (membership === undefined) {
    throw new Error(tenant === undefined ? `${email} belongs to no tenant` : `${email} is not a member of ${tenant}`);
  }
  const token = mintSecret();
  await createSignInLink(
    storage,
    {
      tokenHash: hashSecret(token),
      tenantId: membership.tenantId,
      personId: person.id,
      expiresAt: new Date(clock.now().getTime() + SIGN_IN_LINK_SECONDS * 1000),
    },
    clock.now(),
  );
  return `${publicOrigin}/auth/sign-in?token=${token}`;
}
