/**
 * @kiln/server/testing: the server's test fixtures, for its own tests and other packages'
 * (the CLI's and the MCP server's run the real app through them). Nothing outside src/testing
 * imports this folder, so no production entry point (main.ts, the CLI bundle) loads it. What
 * browser tests need (chromium through playwright-core, a local OpenID provider) is
 * @kiln/server/testing/browser, so the others do not load those libraries.
 */

// What other packages' tests assemble a server from, beyond @kiln/server's public surface.
export { completedCheckRun } from "../domain/source-hosting/check-run-report.js";
export { startLocalHost } from "../local-host.js";
export { masterKey, operatorCredential } from "../web/auth/operator-credential.js";
export { OPERATOR_SESSION_COOKIE } from "../web/auth/session-cookies.js";
export { defaultHandlers } from "../web/handlers/default-handlers.js";
export * from "./app-origin.js";
export * from "./crates.js";
export * from "./debian-crates.js";
export * from "./e2e-jobs.js";
export * from "./harness.js";
export * from "./job-fixtures.js";
export * from "./sign-in.js";
export * from "./test-history-fixtures.js";
