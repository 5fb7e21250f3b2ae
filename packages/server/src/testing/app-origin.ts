import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";

/**
 * kiln on loopback at an origin known before its app is built: the app's publicOrigin and the
 * OpenID callback URL name the port, so the server listens first and hands its requests to the
 * app once `serve` has it ready (the browser tests, the sign-in tests and the log viewer's demo).
 */
export interface AppOrigin {
  /** `http://127.0.0.1:<port>`. */
  readonly base: string;
  /** Readies `app` and routes every request to it from then on. */
  serve(app: FastifyInstance): Promise<void>;
  /** Ends every connection (a browser's kept-alive ones too) and stops listening. */
  close(): Promise<void>;
}

export async function listenBeforeTheApp(): Promise<AppOrigin> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async serve(app) {
      await app.ready();
      server.on("request", (request, response) => app.routing(request, response));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
