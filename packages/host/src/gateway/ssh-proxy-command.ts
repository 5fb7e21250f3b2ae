/**
 * ssh's ProxyCommand for git dependencies fetched over ssh (KILN_GATEWAY_GIT_SSH): asks the
 * gateway's CONNECT proxy (git-egress.ts) for a tunnel to `host:port` and joins it to stdin and
 * stdout, so ssh's connection is held to the egress policy like git's https ones.
 *
 *   node ssh-proxy-command.js <proxy port> <proxy token> <host> <port>
 */
import { connect } from "node:net";

const [proxyPort, token, host, port] = process.argv.slice(2);
if (proxyPort === undefined || token === undefined || host === undefined || port === undefined) {
  process.stderr.write("usage: ssh-proxy-command <proxy port> <token> <host> <port>\n");
  process.exit(2);
}
const target = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
const socket = connect({ host: "127.0.0.1", port: Number(proxyPort) });
socket.write(
  `CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\nproxy-authorization: Basic ${Buffer.from(`kiln:${token}`).toString("base64")}\r\n\r\n`,
);
let head = Buffer.alloc(0);
const onHead = (chunk: Buffer) => {
  head = Buffer.concat([head, chunk]);
  const end = head.indexOf("\r\n\r\n");
  if (end === -1) {
    if (head.length > 8192) process.exit(1);
    return;
  }
  socket.off("data", onHead);
  if (!/^HTTP\/1\.[01] 200 /.test(head.toString("latin1", 0, end))) {
    process.stderr.write(`kiln: the dependency gateway refused the connection to ${target}\n`);
    process.exit(1);
  }
  const rest = head.subarray(end + 4);
  if (rest.length > 0) process.stdout.write(rest);
  socket.pipe(process.stdout);
  process.stdin.pipe(socket);
};
socket.on("data", onHead);
socket.on("error", () => process.exit(1));
socket.on("close", () => process.exit(0));
