#!/usr/bin/env node
// Builds the microVM guest's artifacts (kernel, initramfs, guest root, the admitted stable
// toolchain's image) into a guest directory, once: what a microVM host builds under its data dir
// at its first start (packages/host/src/executor/microvm/guest-images.ts). `npm test` and
// `npm run bench` build the machine's shared test guest directory this way before they run, so
// their microVMs find it ready; a second run builds nothing and says so.
//
//   node scripts/build-guest-images.mjs [directory]   (default: $KILN_TEST_GUEST_DIR or /var/cache/kiln-test/guest)
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { GuestImages, admitToolchain } = await import(pathToFileURL(join(root, "packages/host/dist/src/index.js")).href);

const directory = process.argv[2] ?? process.env.KILN_TEST_GUEST_DIR ?? "/var/cache/kiln-test/guest";
const images = new GuestImages({ directory, log: (line) => process.stderr.write(`guest images: ${line}\n`) });
const { artifacts } = await images.ensureBoot();
artifacts.push(await images.ensureToolchain(await admitToolchain("stable")));
const built = artifacts.filter((a) => a.built).map((a) => a.name);
process.stderr.write(
  built.length === 0
    ? `guest images: nothing built; ${artifacts.length} artifacts found in ${directory}\n`
    : `guest images: built ${built.join(", ")} in ${directory}\n`,
);
