/**
 * The microVM's guest directory shared by several hosts or checkouts (the machine's test guest
 * directory is shared by every checkout on it): an artifact one of them boots from is never
 * removed from under it when another builds a newer one of the same kind, and a superseded one
 * goes once unused for long. Toolchain images stand for every kind (kernel, initramfs, root):
 * each is made and superseded by the same code (guest-images.ts, `#once`), and a toolchain image
 * is a quick mkfs.erofs where an initramfs is a build of the guest agent.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { AdmittedToolchain } from "../src/executor/executor.js";
import { GuestImages, SUPERSEDED_RETENTION_MS } from "../src/executor/microvm/guest-images.js";
import { removeJobDirectories } from "../src/executor/shared/remove-job-directories.js";

describe("the guest directory shared by checkouts", () => {
  let root: string;
  let guest: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), "kiln-guest-cache-"));
    guest = join(root, "guest");
  });
  after(() => removeJobDirectories([root]));

  /** A linked toolchain named `linked-test` (every version shares the name, as one channel's do) whose rustc says `version`. */
  const toolchainVersion = async (version: string): Promise<AdmittedToolchain> => {
    const path = join(root, `toolchain-${version}`);
    // Written once: a linked toolchain's key includes its files' times.
    if (
      await stat(path).then(
        () => true,
        () => false,
      )
    )
      return { name: "linked-test", path };
    await mkdir(join(path, "bin"), { recursive: true });
    await writeFile(join(path, "bin", "cargo"), "#!/bin/sh\n");
    await writeFile(join(path, "bin", "rustc"), `#!/bin/sh\necho ${version}\n`);
    return { name: "linked-test", path };
  };
  const images = async () => (await readdir(join(guest, "toolchains"))).filter((f) => !f.endsWith(".lock")).sort();
  const unusedFor = async (path: string, milliseconds: number) => {
    const then = new Date(Date.now() - milliseconds);
    await utimes(path, then, then);
  };

  it("builds an artifact once: the same content again builds nothing", async () => {
    const checkout = new GuestImages({ directory: guest });
    const v1 = await toolchainVersion("1");
    const first = await checkout.ensureToolchain(v1);
    assert.equal(first.built, true);
    assert.equal((await checkout.ensureToolchain(v1)).built, false, "the same toolchain: nothing built");
  });

  it("keeps what another checkout boots from when a newer artifact of its kind is built, until it is long unused", async () => {
    // Two checkouts on one machine, each with its own version (as two guest agents differ).
    const a = new GuestImages({ directory: guest });
    const b = new GuestImages({ directory: guest });
    const v1 = await toolchainVersion("1");
    const v2 = await toolchainVersion("22");
    const fromA = await a.ensureToolchain(v1);
    const fromB = await b.ensureToolchain(v2);
    assert.equal(fromB.built, true, "a changed content gets an artifact of its own");
    assert.notEqual(fromB.path, fromA.path);
    assert.deepEqual(await images(), [basename(fromA.path), basename(fromB.path)].sort(), "A's is still there");
    assert.equal((await a.ensureToolchain(v1)).built, false, "A finds its own: no rebuild, no ping-pong");

    // A superseded artifact unused beyond the retention goes at the next build of its kind; one
    // in use (marked at every attempt) stays, however old it was.
    await unusedFor(fromA.path, SUPERSEDED_RETENTION_MS + 3_600_000);
    await unusedFor(fromB.path, SUPERSEDED_RETENTION_MS + 3_600_000);
    await b.markInUse([fromB.path]);
    const fromC = await a.ensureToolchain(await toolchainVersion("333"));
    assert.equal(fromC.built, true);
    assert.deepEqual(await images(), [basename(fromB.path), basename(fromC.path)].sort());
    assert.ok((await stat(fromB.path)).mtimeMs > Date.now() - 60_000, "marking in use renews it");
  });
});
