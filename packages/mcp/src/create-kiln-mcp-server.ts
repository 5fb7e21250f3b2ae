import type { KilnClient } from "@kiln/client";
import type { Scope } from "@kiln/contract";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { callOperation } from "./call-operation.js";
import { getPrompt, listPrompts } from "./prompts.js";
import { readResource, resourceKindsForScopes } from "./resources.js";
import { documentResult, failureResult } from "./tool-results.js";
import { splitArguments, toolByName, toolsForScopes } from "./tools.js";

export const KILN_MCP_VERSION = "0.1.0";

export interface KilnMcpServerOptions {
  /** The API client, holding the agent's credential. */
  readonly client: KilnClient;
  /** The credential's scopes (discoverScopes): which tools and resources are listed. */
  readonly scopes: readonly Scope[];
}

const INSTRUCTIONS =
  "kiln runs Cargo builds, checks and tests remotely. Each tool is one kiln API operation, performed with this " +
  "server's credential. A refused operation is a tool error whose structuredContent is the API's Refusal " +
  "{code, status, detail}; a local failure carries {local_error}. Keyed mutations take idempotency_key: repeat " +
  "a call with the same key to retry it safely. Prompts: submit-and-wait, diagnose-a-failure, onboard-a-repository.";

/**
 * kiln's MCP server, independent of any transport: connect it to stdio, streamable HTTP
 * or an in-memory transport. It lists one tool per operation the credential's scopes
 * permit and performs every call through the API, which alone authorizes: a call the
 * API refuses comes back as the refusal.
 */
export function createKilnMcpServer(options: KilnMcpServerOptions): Server {
  const { client, scopes } = options;
  const server = new Server(
    { name: "kiln", title: "kiln remote Cargo builds", version: KILN_MCP_VERSION },
    {
      capabilities: { tools: { listChanged: false }, resources: {}, prompts: {} },
      instructions: INSTRUCTIONS,
    },
  );
  const tools = toolsForScopes(scopes);
  const resourceKinds = resourceKindsForScopes(scopes);

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      ...(tool.readOnly ? { annotations: { readOnlyHint: true } } : {}),
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    // Every catalogued tool is performed, listed or not: the API, not this server,
    // decides what the credential may do (an unlisted one is refused out_of_scope).
    const tool = toolByName(request.params.name);
    if (tool === undefined) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${request.params.name}`);
    const operation = tool.operation.id;
    try {
      const input = splitArguments(tool, request.params.arguments ?? {});
      const document = await callOperation(client, operation, {
        params: input.params,
        query: input.query,
        ...(input.body === undefined ? {} : { body: input.body }),
        ...(input.idempotencyKey === undefined ? {} : { idempotencyKey: input.idempotencyKey }),
      });
      return documentResult(document);
    } catch (error) {
      return failureResult(operation, error);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: resourceKinds
      .filter((kind) => kind.variables.length === 0)
      .map(({ name, title, uriTemplate, description, mimeType }) => ({
        uri: uriTemplate,
        name,
        title,
        description,
        mimeType,
      })),
  }));

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: resourceKinds
      .filter((kind) => kind.variables.length > 0)
      .map(({ name, title, uriTemplate, description, mimeType }) => ({
        uriTemplate,
        name,
        title,
        description,
        mimeType,
      })),
  }));

  server.setRequestHandler(ReadResourceRequestSchema, (request) => readResource(client, request.params.uri));

  server.setRequestHandler(ListPromptsRequestSchema, () => ({ prompts: listPrompts() }));

  server.setRequestHandler(GetPromptRequestSchema, (request) =>
    getPrompt(request.params.name, request.params.arguments ?? {}),
  );

  return server;
}
