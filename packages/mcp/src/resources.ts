import { type KilnClient, KilnRefusal, KilnTransportError } from "@kiln/client";
import { operationById, type Scope } from "@kiln/contract";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { callOperation, type RawInput } from "./call-operation.js";

/** MCP's "resource not found" error code. */
export const RESOURCE_NOT_FOUND = -32002;
/** A refusal from the API while reading a resource (its Refusal document is the error's data). */
export const RESOURCE_REFUSED = -32003;

interface ResourceKind {
  readonly name: string;
  readonly title: string;
  /** `kiln://…` with `{var}` segments (RFC 6570 level 1). */
  readonly uriTemplate: string;
  readonly description: string;
  readonly mimeType: string;
  readonly operation: string;
  /** Path parameter names in template order. */
  readonly variables: readonly string[];
}

export const RESOURCE_KINDS: readonly ResourceKind[] = [
  {
    name: "job",
    title: "Job",
    uriTemplate: "kiln://jobs/{id}",
    description: "A job record: status, failure, transitions (jobs.get).",
    mimeType: "application/json",
    operation: "jobs.get",
    variables: ["id"],
  },
  {
    name: "job-evidence",
    title: "Job evidence",
    uriTemplate: "kiln://jobs/{id}/evidence",
    description: "A job's evidence: phases, crates, tests, usage, settlement (jobs.evidence).",
    mimeType: "application/json",
    operation: "jobs.evidence",
    variables: ["id"],
  },
  {
    name: "job-logs",
    title: "Job log",
    uriTemplate: "kiln://jobs/{id}/logs",
    description: "A job's durable log as text, one record per line (jobs.logs, every page).",
    mimeType: "text/plain",
    operation: "jobs.logs",
    variables: ["id"],
  },
  {
    name: "repository",
    title: "Repository",
    uriTemplate: "kiln://repositories/{owner}/{name}",
    description: "An onboarded repository: lineages, storage, advisories (repositories.get).",
    mimeType: "application/json",
    operation: "repositories.get",
    variables: ["owner", "name"],
  },
  {
    name: "usage",
    title: "Usage this month",
    uriTemplate: "kiln://usage",
    description: "The tenant's usage of the current month, per day and repository (usage.report).",
    mimeType: "application/json",
    operation: "usage.report",
    variables: [],
  },
];

function scopeOf(kind: ResourceKind): Scope {
  const scope = operationById(kind.operation).mcp?.scope;
  if (scope === undefined) throw new Error(`${kind.operation} names no MCP scope`);
  return scope;
}

/** The resource kinds a credential holding `scopes` can read. */
export function resourceKindsForScopes(scopes: readonly Scope[]): ResourceKind[] {
  return RESOURCE_KINDS.filter((kind) => scopes.includes(scopeOf(kind)));
}

function matcherOf(kind: ResourceKind): RegExp {
  const pattern = kind.uriTemplate
    .split(/\{[a-z]+\}/)
    .map((literal) => literal.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"))
    .join("([^/?#]+)");
  return new RegExp(`^${pattern}$`);
}

/** The resource kind a URI names and its variables, or undefined. */
export function parseResourceUri(uri: string): { kind: ResourceKind; values: Record<string, string> } | undefined {
  for (const kind of RESOURCE_KINDS) {
    const match = matcherOf(kind).exec(uri);
    if (match === null) continue;
    const values: Record<string, string> = {};
    try {
      kind.variables.forEach((name, i) => {
        values[name] = decodeURIComponent(match[i + 1] ?? "");
      });
    } catch {
      return undefined;
    }
    return { kind, values };
  }
  return undefined;
}

/** Most log pages one resource read follows (1000 records each). */
const MAX_LOG_PAGES = 50;

interface LogPage {
  records: { text: string; stream?: string }[];
  next_cursor: string | null;
  settled?: boolean;
}

async function readLog(client: KilnClient, id: string): Promise<string> {
  const lines: string[] = [];
  let cursor: string | null | undefined;
  for (let pages = 0; ; pages += 1) {
    if (pages === MAX_LOG_PAGES) {
      lines.push(`[kiln: log continues; read on with jobs_logs {id: "${id}", cursor: "${cursor}"}]`);
      break;
    }
    const query: Record<string, unknown> = { limit: 1000, ...(cursor ? { cursor } : {}) };
    const page = (await callOperation(client, "jobs.logs", { params: { id }, query })) as LogPage;
    lines.push(...page.records.map((record) => record.text));
    if (page.next_cursor === null || page.next_cursor === undefined) break;
    if (page.records.length === 0) {
      lines.push("[kiln: the job has not settled; read again for more of its log]");
      break;
    }
    cursor = page.next_cursor;
  }
  return lines.join("\n");
}

/** Reads a `kiln://` resource through its operation. Refusals and local failures are protocol errors. */
export async function readResource(
  client: KilnClient,
  uri: string,
): Promise<{ contents: { uri: string; mimeType: string; text: string }[] }> {
  const parsed = parseResourceUri(uri);
  if (parsed === undefined) throw new McpError(RESOURCE_NOT_FOUND, `no kiln resource ${uri}`, { uri });
  const { kind, values } = parsed;
  try {
    if (kind.operation === "jobs.logs") {
      return { contents: [{ uri, mimeType: kind.mimeType, text: await readLog(client, values.id ?? "") }] };
    }
    const input: RawInput = kind.variables.length > 0 ? { params: values } : {};
    const document = await callOperation(client, kind.operation, input);
    return { contents: [{ uri, mimeType: kind.mimeType, text: JSON.stringify(document) }] };
  } catch (error) {
    if (error instanceof KilnRefusal) {
      const code = error.code === "not_found" || error.code === "gone" ? RESOURCE_NOT_FOUND : RESOURCE_REFUSED;
      throw new McpError(code, `${kind.operation} refused ${error.code}: ${error.refusal.detail}`, {
        uri,
        refusal: error.refusal,
      });
    }
    if (error instanceof KilnTransportError) {
      throw new McpError(-32603, `kiln mcp could not read ${uri}: ${error.message}`, {
        uri,
        local_error: { kind: "transport", operation: kind.operation, detail: error.message },
      });
    }
    throw error;
  }
}
