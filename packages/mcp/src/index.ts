export { callOperation, type RawInput } from "./call-operation.js";
export { createKilnMcpServer, KILN_MCP_VERSION, type KilnMcpServerOptions } from "./create-kiln-mcp-server.js";
export { CredentialRefused, discoverScopes } from "./discover-scopes.js";
export { DrainingStdioServerTransport } from "./draining-stdio-transport.js";
export { compactSchema, type JsonSchema, plainSchema } from "./json-schema.js";
export { getPrompt, KILN_PROMPTS, listPrompts } from "./prompts.js";
export {
  parseResourceUri,
  RESOURCE_KINDS,
  RESOURCE_NOT_FOUND,
  RESOURCE_REFUSED,
  readResource,
  resourceKindsForScopes,
} from "./resources.js";
export { documentResult, failureResult, type LocalError, localErrorResult, refusalResult } from "./tool-results.js";
export {
  IDEMPOTENCY_KEY_ARGUMENT,
  InvalidToolArguments,
  KILN_TOOLS,
  type KilnTool,
  splitArguments,
  toolByName,
  toolOf,
  toolsForScopes,
} from "./tools.js";
export { StreamableHTTPServerTransport } from "./transports.js";
