import { createHash } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { refuse } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { applyWebhookDelivery } from "./webhook-delivery.js";

export const GITHUB_WEBHOOK_PATH = "/webhooks/github";

/** The provider's largest webhook payload (25 MB); a larger body is refused before it is read further. */
const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;

/** The form of the provider's signature header: an HMAC-SHA256 in hex. */
const SIGNATURE_FORM = /^sha256=[0-9a-f]{64}$/i;

/**
 * `POST /webhooks/github`: the provider's deliveries, outside the operation catalogue (the spec
 * says webhook deliveries are "not shown": no tenant calls this, the provider does, and it
 * authenticates with the delivery's HMAC signature, not a kiln credential). The route keeps the
 * raw body — the signature covers the exact bytes, which a parse-and-reserialize would change —
 * in its own encapsulated scope, so the API's JSON parser is untouched. A missing or wrong
 * `X-Hub-Signature-256` is `unauthenticated` (401) before anything is parsed or written; what the
 * headers decide (no signature of the provider's form, a declared length over the provider's
 * largest, no event or delivery id) is refused before a byte of the body is read, and the read
 * itself stops at that largest. Registered only when a source-hosting app is configured.
 */
export function registerGitHubWebhooks(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const gitHubApp = deps.gitHubApp;
  if (gitHubApp === undefined) return;
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: MAX_WEBHOOK_BYTES }, (_request, body, done) =>
      done(null, body),
    );
    // Before the body is read: an unsigned caller must not make kiln take 25 MiB to refuse it.
    scope.addHook("onRequest", async (request) => {
      const signature = request.headers["x-hub-signature-256"];
      if (typeof signature !== "string" || !SIGNATURE_FORM.test(signature)) {
        refuse("unauthenticated", "a webhook delivery needs its X-Hub-Signature-256 signature (sha256=<hex>)");
      }
      const declared = Number(request.headers["content-length"] ?? 0);
      if (!(declared <= MAX_WEBHOOK_BYTES)) {
        refuse(
          "invalid_request",
          `the webhook delivery declares ${request.headers["content-length"]} bytes; the provider's are at most ${MAX_WEBHOOK_BYTES}`,
        );
      }
      const event = request.headers["x-github-event"];
      const deliveryId = request.headers["x-github-delivery"];
      if (typeof event !== "string" || event === "" || typeof deliveryId !== "string" || deliveryId === "") {
        refuse("invalid_request", "a webhook delivery needs X-GitHub-Event and X-GitHub-Delivery headers");
      }
    });
    scope.post(GITHUB_WEBHOOK_PATH, { bodyLimit: MAX_WEBHOOK_BYTES }, async (request, reply) => {
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const signature = String(request.headers["x-hub-signature-256"]);
      if (raw.length === 0) {
        return refuse("unauthenticated", "a webhook delivery needs a body and its X-Hub-Signature-256 signature");
      }
      // Constant-time comparison of the HMAC (Octokit's verify); the secret never leaves the app object.
      const valid = await gitHubApp.verifyWebhook(raw.toString("utf8"), signature).catch(() => false);
      if (!valid) return refuse("unauthenticated", "the webhook delivery's X-Hub-Signature-256 does not match");
      const event = String(request.headers["x-github-event"]);
      const deliveryId = String(request.headers["x-github-delivery"]);
      let payload: unknown;
      try {
        payload = JSON.parse(raw.toString("utf8"));
      } catch {
        return refuse("invalid_request", "the webhook delivery's body is not JSON");
      }
      const result = await applyWebhookDelivery(
        { deps, handlers, request, reply, log: request.log },
        { deliveryId, event, bodySha256: createHash("sha256").update(raw).digest("hex"), payload },
      );
      // 200 when it changed something, 202 when it was recorded and ignored (unknown event or
      // installation, a replay): either way the provider need not redeliver it.
      return reply.code(result.applied ? 200 : 202).send({ delivery: deliveryId, outcome: result.outcome });
    });
  });
}
