import { execFile } from "node:child_process";
import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { HostReadRefusal } from "./host-read-refusal.js";

const run = promisify(execFile);

/** The units whose executions an export includes: the host agent's and the embedded control plane's. */
export const EXPORTED_UNITS = ["kiln-host.service", "kiln-server.service"] as const;
/** Unit executions included unless the operator names another number. */
export const DEFAULT_EXPORT_EXECUTIONS = 5;

/**
 * The bounded evidence export (operator rule 8): JSON lines of this boot's journal, the newest
 * `executions` executions of each kiln unit with their logs, and the retained files of every
 * attempt numbered `attempt` in the host's evidence directory (`<job>-a<attempt>/…`), newest
 * record first within each part. Records count against `maxBytes`; every item that did not fit
 * (or lay beyond `executions`) is named in an `omitted` record, which is always written. The
 * boot id is read before and after: a host that rebooted meanwhile is a `conflict`, and an
 * attempt with no retained files is `not_found`.
 */
export async function exportEvidence(input: {
  evidenceRoot: string | null;
  attempt: number | null;
  executions: number | null;
  maxBytes: number;
}): Promise<{ content: Buffer; truncated: boolean; detail: string }> {
  const bootBefore = await bootId();
  const lines: string[] = [];
  const omitted: { item: string; reason: string }[] = [];
  let used = 0;
  const add = (item: string, record: Record<string, unknown>) => {
    const line = `${JSON.stringify(record)}\n`;
    const size = Buffer.byteLength(line);
    if (used + size > input.maxBytes) {
      omitted.push({ item, reason: `${size} bytes over the ${input.maxBytes}-byte bound (${used} used)` });
      return;
    }
    used += size;
    lines.push(line);
  };

  const attemptFiles = input.attempt === null ? [] : await retainedFiles(input.evidenceRoot, input.attempt);

  // This boot's journal, newest lines first, as many as fit in half the bound: the unit logs
  // and the attempt's files get the rest.
  const journal = (await output("journalctl", ["--boot", "--no-pager", "--output=short-iso", "--reverse"])).split("\n");
  let journalBytes = 0;
  let kept = 0;
  for (const line of journal) {
    const size = Buffer.byteLength(line) + 1;
    if (journalBytes + size > input.maxBytes / 2) break;
    journalBytes += size;
    kept += 1;
  }
  add("journal", { record: "journal", boot: bootBefore, lines: kept, text: journal.slice(0, kept).join("\n") });
  if (kept < journal.length) {
    omitted.push({ item: `journal: ${journal.length - kept} older lines`, reason: "over half the byte bound" });
  }

  const executions = input.executions ?? DEFAULT_EXPORT_EXECUTIONS;
  for (const unit of EXPORTED_UNITS) {
    const runs = await unitExecutions(unit);
    if (runs.length === 0) {
      add(`unit_log ${unit}`, {
        record: "unit_log",
        unit,
        invocation: null,
        detail: "no execution of the unit in this boot's journal",
      });
    }
    for (const [index, execution] of runs.entries()) {
      const item = `unit_log ${unit} ${execution.invocation}`;
      if (index >= executions) omitted.push({ item, reason: `beyond executions=${executions}` });
      else
        add(item, { record: "unit_log", unit, invocation: execution.invocation, text: execution.messages.join("\n") });
    }
  }

  for (const file of attemptFiles) {
    const bytes = await readFile(file.absolute);
    add(`attempt_file ${file.path}`, {
      record: "attempt_file",
      attempt: input.attempt,
      path: file.path,
      bytes: bytes.length,
      content_base64: bytes.toString("base64"),
    });
  }

  if ((await bootId()) !== bootBefore) {
    throw new HostReadRefusal("conflict", "the host rebooted while the export was read; read it again");
  }
  for (const entry of omitted) lines.push(`${JSON.stringify({ record: "omitted", ...entry })}\n`);
  return {
    content: Buffer.from(lines.join("")),
    truncated: omitted.length > 0,
    detail: `evidence export of boot ${bootBefore}: ${lines.length - omitted.length} records, ${omitted.length} omitted`,
  };
}

async function bootId(): Promise<string> {
  return (await readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim();
}

async function output(file: string, args: readonly string[]): Promise<string> {
  const { stdout } = await run(file, [...args], { maxBuffer: 256 * 2 ** 20, timeout: 30_000 });
  return stdout.trimEnd();
}

/** A unit's executions in this boot's journal, newest first, each with its messages. */
async function unitExecutions(unit: string): Promise<{ invocation: string; messages: string[] }[]> {
  const text = await output("journalctl", ["--boot", "--no-pager", "--output=json", `--unit=${unit}`]);
  const byInvocation = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const entry = JSON.parse(line) as { _SYSTEMD_INVOCATION_ID?: string; INVOCATION_ID?: string; MESSAGE?: unknown };
    const invocation = entry._SYSTEMD_INVOCATION_ID ?? entry.INVOCATION_ID ?? "unknown";
    const messages = byInvocation.get(invocation) ?? [];
    messages.push(typeof entry.MESSAGE === "string" ? entry.MESSAGE : JSON.stringify(entry.MESSAGE ?? null));
    byInvocation.set(invocation, messages);
  }
  return [...byInvocation.entries()].reverse().map(([invocation, messages]) => ({ invocation, messages }));
}

/** Every retained file of the attempts numbered `attempt` (`<job>-a<attempt>/…`), newest directory first. */
async function retainedFiles(root: string | null, attempt: number): Promise<{ path: string; absolute: string }[]> {
  if (root === null) throw new HostReadRefusal("not_found", "this host keeps no evidence directory");
  const suffix = `-a${attempt}`;
  const directories: { name: string; modified: number }[] = [];
  const entries = await readdir(root, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT")
      throw new HostReadRefusal("not_found", `the evidence directory ${root} does not exist`);
    throw error;
  });
  for (const entry of entries) {
    if (entry.isDirectory() && entry.name.endsWith(suffix)) {
      directories.push({ name: entry.name, modified: (await stat(join(root, entry.name))).mtimeMs });
    }
  }
  if (directories.length === 0) {
    throw new HostReadRefusal("not_found", `no retained files of an attempt ${attempt} on this host`);
  }
  directories.sort((a, b) => b.modified - a.modified || a.name.localeCompare(b.name));
  const files: { path: string; absolute: string }[] = [];
  for (const directory of directories) {
    // Regular files only: a symlink in an attempt's directory is not followed out of it.
    const entries = await readdir(join(root, directory.name), { withFileTypes: true, recursive: true });
    for (const entry of entries.filter((e) => e.isFile()).sort((a, b) => a.name.localeCompare(b.name))) {
      const absolute = join(entry.parentPath, entry.name);
      files.push({ path: relative(root, absolute), absolute });
    }
  }
  return files;
}
