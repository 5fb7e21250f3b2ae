// @peculiar/x509 resolves its dependencies through tsyringe, which needs the Reflect metadata
// polyfill loaded first; ES modules evaluate their imports in order, so this import must stay
// above the library's.
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

// The library signs and verifies through WebCrypto: Node's own.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export { x509 };

/** The one key algorithm kiln issues and accepts: ECDSA on P-256, signing with SHA-256. */
export const KEY_ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
