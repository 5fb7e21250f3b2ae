export type { Principal } from "./auth/principal.js";
export { hashToken, mintToken, type TokenKind, tokenKindOf } from "./auth/token-format.js";
export { buildApp } from "./build-app.js";
export type { AppDeps } from "./deps.js";
