import fastifyCookie from "@fastify/cookie";
import { startJobNotifications } from "@kiln/storage";
import Fastify, { type FastifyInstance } from "fastify";
import { LastUsedRecorder } from "./web/auth/last-used-recorder.js";
import { defaultHandlers } from "./web/handlers/default-handlers.js";
import type { AppDeps } from "./web/http/app-deps.js";
import { bindCatalogueRoutes } from "./web/http/bind-catalogue-routes.js";
import { installBodyParsers, largeBodiesOf } from "./web/http/body-parsers.js";
import { installErrorBoundary } from "./web/http/error-boundary.js";
import { clientErrorHandler, frameworkErrors, MAX_PARAM_LENGTH } from "./web/http/framework-errors.js";
import type { HandlerTable } from "./web/http/handler.js";
import { installRequestValidators } from "./web/http/request-validators.js";
import { installResponseContractCheck } from "./web/http/response-contract-check.js";
import { endStreamsOf } from "./web/http/sse-stream.js";
import { registerCredentialPages } from "./web/pages/credential-pages.js";
import { notFoundPage } from "./web/pages/dashboard-layout.js";
import { registerGitHubClaim } from "./web/pages/github-claim.js";
import { registerJobPages } from "./web/pages/job-pages.js";
import { registerOidcSignIn } from "./web/pages/oidc-sign-in.js";
import { registerOperatorPages } from "./web/pages/operator-pages.js";
import { sendPage } from "./web/pages/page-response.js";
import { registerPages } from "./web/pages/register-pages.js";
import { registerRepositoryPages } from "./web/pages/repository-pages.js";
import { registerTenantPages } from "./web/pages/tenant-pages.js";
import { registerUsagePages } from "./web/pages/usage-pages.js";
import { registerGitHubWebhooks } from "./web/webhooks/webhook-route.js";

/**
 * The whole HTTP service, built from its dependencies. It never listens: tests
 * inject requests, and main.ts listens.
 */
export function buildApp(given: AppDeps, handlers: HandlerTable = defaultHandlers): FastifyInstance {
  const app = Fastify({
    logger:
      given.logger === false || given.logger === undefined
        ? false
        : {
            ...(typeof given.logger === "object" ? given.logger : {}),
            // Query strings may carry device codes and headers carry credentials:
            // requests are logged by method and path only.
            serializers: {
              req: (req: { method: string; url: string; id: string }) => ({
                id: req.id,
                method: req.method,
                path: req.url.split("?")[0],
              }),
            },
          },
    // Operation paths are matched exactly; `/api/jobs/` is not `/api/jobs`.
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: MAX_PARAM_LENGTH },
    // What the router and Node's HTTP parser refuse is a Refusal document too.
    frameworkErrors,
    clientErrorHandler,
    return503OnClosing: true,
  });
  const notifications =
    given.notifications ?? startJobNotifications(given.storage, { clock: given.clock, log: app.log });
  const ownNotifications = given.notifications === undefined ? notifications : null;
  // The body workers also parse jobs.submit's TOML files (handlers/jobs.ts reads them from deps).
  const large = given.largeBodies ?? largeBodiesOf(given);
  const deps: AppDeps = {
    ...given,
    lastUsed: given.lastUsed ?? new LastUsedRecorder(given.storage, { clock: given.clock, log: app.log }),
    notifications,
    largeBodies: large,
  };
  void app.register(fastifyCookie);
  // Open event streams end before the server closes, rather than holding it up until their next read.
  app.addHook("preClose", async () => {
    endStreamsOf(app.server);
  });
  app.addHook("onClose", async () => {
    if (given.largeBodies === undefined) await large.pool?.close();
    await deps.lastUsed?.close();
    await ownNotifications?.stop();
  });
  installErrorBoundary(app, (reply, path) => sendPage(reply, 404, notFoundPage(path)));
  installRequestValidators(app);
  installBodyParsers(app, large, deps.blobs.stagingDirectory);
  if (deps.checkResponses === true) installResponseContractCheck(app);
  bindCatalogueRoutes(app, deps, handlers, large);
  registerPages(app, deps);
  registerOidcSignIn(app, deps);
  registerJobPages(app, deps, handlers);
  registerOperatorPages(app, deps, handlers);
  registerRepositoryPages(app, deps, handlers);
  registerTenantPages(app, deps, handlers);
  registerCredentialPages(app, deps, handlers);
  registerUsagePages(app, deps, handlers);
  registerGitHubWebhooks(app, deps, handlers);
  registerGitHubClaim(app, deps);
  return app;
}
