export { buildApp } from "./build-app.js";
export type { Principal } from "./domain/identity/principal.js";
export { hashToken, mintToken, type TokenKind, tokenKindOf } from "./domain/identity/token-format.js";
export type { AppDeps } from "./web/http/app-deps.js";
