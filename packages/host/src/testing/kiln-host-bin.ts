import { fileURLToPath } from "node:url";

/** kiln-host's built entry point (the package's `kiln-host` bin), for the tests that run it as a process. */
export const KILN_HOST_BIN = fileURLToPath(new URL("../remote/main.js", import.meta.url));
