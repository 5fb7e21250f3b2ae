/**
 * The SDK transport kiln's HTTP server runs on, re-exported so the `kiln` CLI (which wires it)
 * depends on @kiln/mcp alone rather than on the SDK directly. On stdio it runs on
 * DrainingStdioServerTransport (draining-stdio-transport.ts), the SDK's own wrapped.
 */
export { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
