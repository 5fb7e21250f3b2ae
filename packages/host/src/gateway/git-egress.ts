import { randomBytes, timingSafeEqual } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import type { EgressPolicy } from "./egress-policy.js";
import type { FetchBudget } from "./fetch-bounds.js";
import { GatewayError } from "./gateway-error.js";

/** The system's CA bundle (Debian's ca-certificates), extended when the operator adds a CA. */
const SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";

/**
 * How git reaches a tenant's repository: through a CONNECT proxy of the gateway's own, which
 * applies the egress policy to every connection git makes.
 *
 * git resolves names itself (through curl), so checking a URL's address before running git
 * would be undone by a DNS answer that changes between the check and git's own lookup (DNS
 * rebinding), and by redirects git follows. Pinning git's resolution (`http.curloptResolve`)
 * would still leave redirects to other hosts unchecked. So git is given `http.proxy` pointing
 * at this proxy: curl then never resolves or connects to an upstream itself; it asks the proxy
 * for a tunnel to `host:port` (TLS stays end to end, verified by curl against the host's
 * name), and the proxy resolves the name once, checks the addresses by the policy and connects
 * to a checked one — for the first request, every redirect and every other host git tries. The
 * proxy also counts the bytes received against the job's budget and cuts the tunnel when it is
 * spent, and closes a tunnel idle for the idle timeout. It listens on loopback for the one
 * job's gits only, each request carrying a random proxy credential.
 *
 * git itself is held to the same schemes (`GIT_ALLOW_PROTOCOL`: https, plus ssh when the
 * operator allows it, whose connections go through the proxy too as ssh's ProxyCommand): `file`,
 * `fd`, `ext` and local paths are refused by git as well as by the URL check before it.
 */
export class GitEgress {
  #lastRefusal: GatewayError | null = null;
  #budgetError: GatewayError | null = null;
  readonly #sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private readonly token: string,
    private readonly policy: EgressPolicy,
    private readonly budget: FetchBudget,
    private readonly idleTimeoutMs: number,
    /** A directory of this job's own (the CA bundle git is given). */
    private readonly scratch: string,
    private readonly caBundle: string | null,
  ) {}

  static async start(options: {
    readonly policy: EgressPolicy;
    readonly budget: FetchBudget;
    readonly idleTimeoutMs: number;
    readonly extraCa?: string;
  }): Promise<GitEgress> {
    const scratch = await mkdtemp(join(tmpdir(), "kiln-git-egress-"));
    let caBundle: string | null = null;
    if (options.extraCa !== undefined) {
      caBundle = join(scratch, "ca-bundle.crt");
      const system = await readFile(SYSTEM_CA_BUNDLE, "utf8").catch(() => "");
      await writeFile(caBundle, `${system}\n${options.extraCa}\n`, { mode: 0o600 });
    }
    const server = createServer((_req, res) => {
      // Only tunnels: a plain http request through the proxy would be fetched by it unchecked.
      res.writeHead(405, { connection: "close" }).end();
    });
    const egress = new GitEgress(
      server,
      randomBytes(18).toString("base64url"),
      options.policy,
      options.budget,
      options.idleTimeoutMs,
      scratch,
      caBundle,
    );
    server.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => {
      egress.#tunnel(req, client, head).catch(() => client.destroy());
    });
    server.on("connection", (socket: Socket) => {
      egress.#sockets.add(socket);
      socket.on("close", () => egress.#sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return egress;
  }

  get #port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** `-c` options of every git command that reaches a tenant's URL. */
  configArgs(): string[] {
    return [
      "-c",
      `http.proxy=http://kiln:${this.token}@127.0.0.1:${this.#port}`,
      "-c",
      "http.proxyAuthMethod=basic",
      // Give up on an upstream sending under a byte a second for the idle timeout.
      "-c",
      "http.lowSpeedLimit=1",
      "-c",
      `http.lowSpeedTime=${Math.max(1, Math.round(this.idleTimeoutMs / 1000))}`,
      "-c",
      "credential.helper=",
      "-c",
      "core.askPass=",
      ...(this.caBundle === null ? [] : ["-c", `http.sslCAInfo=${this.caBundle}`]),
    ];
  }

  /** The environment of those commands (added to git's own clean one). */
  environment(): Record<string, string> {
    const ssh = this.policy.rules.gitSsh;
    return {
      GIT_ALLOW_PROTOCOL: ssh ? "https:ssh" : "https",
      GIT_ASKPASS: "/bin/false",
      ...(ssh
        ? {
            GIT_SSH_VARIANT: "ssh",
            GIT_SSH_COMMAND: [
              "ssh",
              "-F /dev/null",
              "-o BatchMode=yes",
              "-o StrictHostKeyChecking=yes",
              "-o UserKnownHostsFile=/etc/ssh/ssh_known_hosts",
              `-o ${shellQuote(`ProxyCommand=${shellQuote(process.execPath)} ${shellQuote(PROXY_COMMAND_SCRIPT)} ${this.#port} ${this.token} %h %p`)}`,
            ].join(" "),
          }
        : {}),
    };
  }

  /** The policy's last refusal of a connection git asked for (its first refusal ends the job). */
  get lastRefusal(): GatewayError | null {
    return this.#lastRefusal;
  }

  /** The byte budget's refusal, once a tunnel spent it. */
  get budgetError(): GatewayError | null {
    return this.#budgetError;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await rm(this.scratch, { recursive: true, force: true });
  }

  async #tunnel(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    const expected = Buffer.from(`Basic ${Buffer.from(`kiln:${this.token}`).toString("base64")}`);
    const given = Buffer.from(String(req.headers["proxy-authorization"] ?? ""));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      client.end("HTTP/1.1 407 Proxy Authentication Required\r\nconnection: close\r\n\r\n");
      return;
    }
    let target: URL;
    try {
      target = new URL(`https://${req.url ?? ""}`);
      if (target.pathname !== "/" || target.port === "") throw new Error("not host:port");
    } catch {
      client.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
      return;
    }
    let addresses: Awaited<ReturnType<EgressPolicy["addressesFor"]>>;
    try {
      addresses = await this.policy.addressesFor(target, "git's connection to");
    } catch (error) {
      if (error instanceof GatewayError) this.#lastRefusal = error;
      client.end("HTTP/1.1 403 Forbidden\r\nconnection: close\r\n\r\n");
      return;
    }
    const port = Number(target.port);
    let upstream: Socket | null = null;
    for (const { address } of addresses) {
      upstream = await new Promise<Socket | null>((resolve) => {
        const socket = connect({ host: address, port, timeout: this.idleTimeoutMs });
        socket.once("connect", () => resolve(socket));
        socket.once("error", () => resolve(null));
        socket.once("timeout", () => {
          socket.destroy();
          resolve(null);
        });
      });
      if (upstream !== null) break;
    }
    if (upstream === null) {
      client.end("HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\n");
      return;
    }
    this.#sockets.add(upstream);
    upstream.on("close", () => this.#sockets.delete(upstream));
    for (const socket of [upstream, client]) {
      socket.setTimeout(this.idleTimeoutMs, () => socket.destroy());
    }
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length > 0) upstream.write(head);
    const counted = new Transform({
      transform: (chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) => {
        try {
          this.budget.take(chunk.length, `git's download from ${target.host}`);
          done(null, chunk);
        } catch (error) {
          this.#budgetError ??= error as GatewayError;
          done(error as Error);
        }
      },
    });
    await Promise.allSettled([pipeline(upstream, counted, client), pipeline(client, upstream)]);
    upstream.destroy();
    client.destroy();
  }
}

/** The ssh ProxyCommand that connects through the proxy (compiled beside this file). */
const PROXY_COMMAND_SCRIPT = fileURLToPath(new URL("./ssh-proxy-command.js", import.meta.url));

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
