/**
 * @kiln/server/testing/browser: what the browser tests of every package share (a separate export
 * from @kiln/server/testing, so the tests that open no browser do not load playwright-core).
 */
import { type Browser, chromium, type Page } from "playwright-core";

export * from "./local-oidc-provider.js";

/** Debian's chromium (scripts/ensure-setup.mjs installs it for `test`). */
export const CHROMIUM = "/usr/bin/chromium";

/** Debian's chromium, headless, driven by playwright-core: the browser every browser test opens. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
}

/**
 * A browser test's after(): the browser first (its pages keep connections to kiln open), then the
 * rest in the order given (kiln's origin, the provider, the app, storage); whatever before() did
 * not get to open is skipped.
 */
export async function closeBrowserTest(
  browser: Browser | undefined,
  ...rest: ({ close(): Promise<unknown> } | undefined)[]
): Promise<void> {
  await browser?.close();
  for (const part of rest) await part?.close();
}

/**
 * Collects what a dashboard page must never do, for the test to assert empty: a script error
 * (`pageErrors`) and a Content-Security-Policy violation the browser reports on its console
 * (`policyViolations`; the same array as `pageErrors` where a test keeps one list).
 */
export function watchPageProblems(page: Page, into: { pageErrors: string[]; policyViolations: string[] }): void {
  page.on("pageerror", (error) => into.pageErrors.push(error.message));
  page.on("console", (message) => {
    if (/Content[- ]Security[- ]Policy/i.test(message.text())) into.policyViolations.push(message.text());
  });
}
