import { createHash } from "node:crypto";

/** A bare-metal provider's refusal or failure, with its HTTP status and error document. */
export class BareMetalApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`bare-metal provider answered ${status} ${code}: ${message}`);
    this.name = "BareMetalApiError";
  }
}

/**
 * A client of a dedicated-server provider's robot API in the shape Hetzner's Robot webservice
 * documents (https://robot.hetzner.com/doc/webservice/en.html): HTTP basic authentication,
 * form-encoded requests, JSON answers wrapped in the resource's name, errors as
 * `{"error": {"status", "code", "message"}}`.
 *
 * - `POST /reset/{server}` with `type=hw` — a hardware reset (`{"reset": {...}}`).
 * - `POST /boot/{server}/rescue` with `os=linux` and `authorized_key[]` — arm the rescue system
 *   for the next boot (`{"rescue": {...}}`).
 * - `POST /boot/{server}/linux` with `dist` and `lang` — arm a reinstallation for the next boot.
 * - `GET /server/{server}` — the server's record, with its `status`.
 *
 * The credential is read when a request is made and never logged or reported.
 */
export class BareMetalClient {
  constructor(
    private readonly options: {
      endpoint: string;
      /** `user:password` for basic authentication; read on each request. */
      credential: () => Promise<string>;
      fetch?: typeof fetch;
      timeoutMs?: number;
    },
  ) {}

  reset(server: string): Promise<unknown> {
    return this.#call("POST", `/reset/${encodeURIComponent(server)}`, { type: "hw" }, "reset");
  }

  armRescue(server: string, authorizedKey: string | null): Promise<unknown> {
    const form: Record<string, string> = { os: "linux" };
    if (authorizedKey !== null) form["authorized_key[]"] = fingerprintOf(authorizedKey);
    return this.#call("POST", `/boot/${encodeURIComponent(server)}/rescue`, form, "rescue");
  }

  armReinstallation(server: string, dist: string): Promise<unknown> {
    return this.#call("POST", `/boot/${encodeURIComponent(server)}/linux`, { dist, lang: "en" }, "linux");
  }

  async status(server: string): Promise<string> {
    const record = (await this.#call("GET", `/server/${encodeURIComponent(server)}`, null, "server")) as {
      status?: unknown;
    };
    return typeof record.status === "string" ? record.status : "unknown";
  }

  async #call(method: string, path: string, form: Record<string, string> | null, wrapper: string): Promise<unknown> {
    const headers: Record<string, string> = {
      authorization: `Basic ${Buffer.from(await this.options.credential()).toString("base64")}`,
    };
    let body: string | undefined;
    if (form !== null) {
      headers["content-type"] = "application/x-www-form-urlencoded";
      body = new URLSearchParams(form).toString();
    }
    const response = await (this.options.fetch ?? fetch)(`${this.options.endpoint.replace(/\/+$/, "")}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(this.options.timeoutMs ?? 60_000),
    });
    const text = await response.text();
    let document: Record<string, unknown> = {};
    try {
      document = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // A non-JSON answer is reported by its status below.
    }
    if (!response.ok) {
      const error = (document.error ?? {}) as { code?: unknown; message?: unknown };
      throw new BareMetalApiError(
        response.status,
        typeof error.code === "string" ? error.code : "UNKNOWN",
        typeof error.message === "string" ? error.message : text.slice(0, 300),
      );
    }
    return document[wrapper];
  }
}

/** The MD5 fingerprint (colon-separated) by which the robot API names an SSH key. */
export function fingerprintOf(openSshPublicKey: string): string {
  const blob = openSshPublicKey.trim().split(/\s+/)[1] ?? "";
  const digest = createHash("md5").update(Buffer.from(blob, "base64")).digest("hex");
  return digest.match(/../g)?.join(":") ?? digest;
}
