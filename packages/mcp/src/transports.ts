/**
 * The SDK transports kiln's server runs on, re-exported so the `kiln` CLI (which wires
 * them) depends on @kiln/mcp alone rather than on the SDK directly.
 */
export { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
export { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
