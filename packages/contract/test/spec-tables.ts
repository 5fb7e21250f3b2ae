import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { A, K, type RefusalCode } from "../src/refusal-codes.js";

/**
 * Reads the user's interface specification (shared/spec beside the repository, or
 * KILN_SPEC_PATH) so the catalogue is checked against the contract's own tables
 * rather than a copy of them.
 */
export function specText(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [
    process.env.KILN_SPEC_PATH,
    join(here, "../../../../../shared/spec/interface-specification.md"),
    join(here, "../../../../../../shared/spec/interface-specification.md"),
  ].filter((p): p is string => p !== undefined);
  const found = candidates.find((p) => existsSync(p));
  if (found === undefined) {
    throw new Error(`interface specification not found (looked in ${candidates.join(", ")}); set KILN_SPEC_PATH`);
  }
  return readFileSync(found, "utf8");
}

export interface SpecOperation {
  id: string;
  method: string;
  path: string;
  /** The scope/security cell, where the table has one. */
  security: string | null;
  refusals: RefusalCode[];
  section: string;
}

function expand(cell: string): RefusalCode[] {
  const out: RefusalCode[] = [];
  for (const raw of cell.split(",").map((s) => s.trim())) {
    if (raw === "" || raw === "none") continue;
    if (raw === "A") out.push(...A);
    else if (raw === "K") out.push(...K);
    else out.push(raw as RefusalCode);
  }
  return out;
}

/** Every row of the spec's endpoint tables: identifier, method, path, security, refusals. */
export function specOperations(text = specText()): SpecOperation[] {
  const ops: SpecOperation[] = [];
  let section = "";
  let header: string[] = [];
  for (const line of text.split("\n")) {
    if (line.startsWith("### ")) section = line.slice(4).trim();
    if (!line.startsWith("|")) continue;
    const cells = line
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
    if (cells[0] === "operation") {
      header = cells;
      continue;
    }
    const [id, route] = cells;
    const routeMatch = /^(GET|POST|DELETE|PATCH) (\/\S+)$/.exec(route ?? "");
    if (id === undefined || !/^[a-z_]+(\.[a-z_]+)+$/.test(id) || routeMatch === null) continue;
    const refusalHeader = header[header.length - 1] ?? "";
    const refusals = expand(cells[cells.length - 1] ?? "");
    if (refusalHeader.includes("plus A")) refusals.unshift(...A);
    if (section === "Operator endpoints") refusals.unshift("operator_not_found", "unavailable");
    const securityColumn = header.findIndex((h) => h === "scope" || h === "security");
    ops.push({
      id,
      method: routeMatch[1] ?? "",
      path: routeMatch[2] ?? "",
      security: securityColumn < 0 ? null : (cells[securityColumn] ?? null),
      refusals: [...new Set(refusals)],
      section,
    });
  }
  return ops;
}

/** The MCP tool table: tool → operation and scope. */
export function specMcpTools(text = specText()): { tool: string; operation: string; scope: string }[] {
  const start = text.indexOf("### MCP tool server");
  const tools = [];
  for (const line of text.slice(start, text.indexOf("Resources:", start)).split("\n")) {
    const m = /^\| ([a-z_]+) \| ([a-z_.]+) \| ([a-z]+) \|$/.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined && m[3] !== undefined && m[1] !== "tool") {
      tools.push({ tool: m[1], operation: m[2], scope: m[3] });
    }
  }
  return tools;
}

/** The Errors table: code → status. */
export function specRefusalStatuses(text = specText()): Map<string, number> {
  const start = text.indexOf("## Errors");
  const out = new Map<string, number>();
  for (const line of text.slice(start, text.indexOf("## Limits")).split("\n")) {
    const m = /^\| ([a-z_]+) \| (\d{3}) \|/.exec(line.trim());
    if (m?.[1] !== undefined) out.set(m[1], Number(m[2]));
  }
  return out;
}
