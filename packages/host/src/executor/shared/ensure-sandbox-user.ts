/**
 * The dedicated unprivileged host user the sandbox runs as, created on first use. bubblewrap
 * runs as this user (not as root), so its user namespace maps the sandbox to this uid: a
 * process that escaped every namespace would still be an unprivileged host uid, never root.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface SandboxUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

async function lookUp(name: string): Promise<SandboxUser | null> {
  try {
    const { stdout } = await run("getent", ["passwd", name]);
    const fields = stdout.trim().split(":");
    const uid = Number(fields[2]);
    const gid = Number(fields[3]);
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) return null;
    return { name, uid, gid };
  } catch {
    // getent exits 2 when the user does not exist.
    return null;
  }
}

export async function ensureSandboxUser(name: string): Promise<SandboxUser> {
  if (!/^[a-z_][a-z0-9_-]{0,30}$/.test(name)) throw new Error(`invalid sandbox user name ${JSON.stringify(name)}`);
  let user = await lookUp(name);
  if (user === null) {
    // A system account with its own group, no home and no login shell: it exists only to own sandboxes.
    await run("useradd", [
      "--system",
      "--user-group",
      "--no-create-home",
      "--home-dir",
      "/nonexistent",
      "--shell",
      "/usr/sbin/nologin",
      name,
    ]).catch((error: unknown) => {
      // Another agent process may have created it concurrently (useradd exits 9 for "already exists").
      if ((error as { code?: number }).code !== 9) throw error;
    });
    user = await lookUp(name);
  }
  if (user === null) throw new Error(`sandbox user ${name} could not be created`);
  if (user.uid === 0 || user.gid === 0) throw new Error(`sandbox user ${name} must not be root (uid ${user.uid})`);
  return user;
}
