import { execFile } from "node:child_process";
import { open, realpath } from "node:fs/promises";
import { isAbsolute, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import type { HostReadOrder } from "@kiln/contract";
import { exportEvidence } from "./export-evidence.js";
import { HostReadRefusal } from "./host-read-refusal.js";

const run = promisify(execFile);

/** What a host read answered: at most maxBytes bytes, and whether more were left out. */
export interface HostReadResult {
  readonly content: Buffer;
  readonly truncated: boolean;
  readonly detail: string;
}

/** Reads an operator asks of this host; each throws saying why it could not read. */
export interface HostReads {
  read(order: HostReadOrder): Promise<HostReadResult>;
}

/** The newest `maxBytes` of a log, cut at a line start so no line arrives half. */
function newest(bytes: Buffer, maxBytes: number): { content: Buffer; truncated: boolean } {
  if (bytes.length <= maxBytes) return { content: bytes, truncated: false };
  const tail = bytes.subarray(bytes.length - maxBytes);
  const lineStart = tail.indexOf(10);
  return { content: lineStart === -1 ? tail : tail.subarray(lineStart + 1), truncated: true };
}

async function commandOutput(file: string, args: readonly string[]): Promise<Buffer> {
  try {
    const { stdout } = await run(file, [...args], { encoding: "buffer", maxBuffer: 256 * 2 ** 20, timeout: 30_000 });
    return stdout;
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? "").trim();
    throw new Error(`${file} ${args.join(" ")} failed: ${stderr || String(error)}`);
  }
}

/**
 * The real reads: the system journal (`journalctl`), the kernel log (`dmesg`), and one file of
 * the host's evidence directory, never outside it (no absolute path, no `..`, no symlink out).
 * `evidenceRoot` null: the host keeps no evidence directory, and an evidence read says so.
 */
export function realHostReads(options: { readonly evidenceRoot: string | null }): HostReads {
  return {
    async read(order) {
      switch (order.kind) {
        case "journal": {
          const { content, truncated } = newest(
            await commandOutput("journalctl", ["--no-pager", "--output=short-iso", "--lines=100000"]),
            order.maxBytes,
          );
          return { content, truncated, detail: `journalctl: ${content.length} bytes, the newest` };
        }
        case "kernel_log": {
          const { content, truncated } = newest(await commandOutput("dmesg", ["--time-format=iso"]), order.maxBytes);
          return { content, truncated, detail: `dmesg: ${content.length} bytes, the newest` };
        }
        case "evidence":
          return readEvidenceFile(options.evidenceRoot, order.path, order.maxBytes);
        case "evidence_export":
          return exportEvidence({ evidenceRoot: options.evidenceRoot, ...order });
        case "reap_sandbox":
          // FleetChannel hands reaps to its SandboxReaper; one reaching here has none.
          throw new Error("this host does not reap sandboxes");
      }
    },
  };
}

async function readEvidenceFile(root: string | null, path: string | null, maxBytes: number): Promise<HostReadResult> {
  if (root === null) throw new Error("this host keeps no evidence directory");
  if (path === null || isAbsolute(path) || path.split(/[\\/]/).includes("..")) {
    throw new Error(`evidence path ${JSON.stringify(path)} must be relative to the evidence directory, without ..`);
  }
  const realRoot = await realpath(root);
  let file: string;
  try {
    file = await realpath(join(realRoot, path));
  } catch {
    throw new HostReadRefusal("not_found", `no evidence file ${path}`);
  }
  const inside = relative(realRoot, file);
  if (inside === "" || inside.startsWith(`..${sep}`) || inside === ".." || isAbsolute(inside)) {
    throw new Error(`evidence path ${path} leads outside the evidence directory`);
  }
  const handle = await open(file, "r");
  try {
    const size = (await handle.stat()).size;
    const buffer = Buffer.alloc(Math.min(size, maxBytes));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return {
      content: buffer.subarray(0, bytesRead),
      truncated: size > maxBytes,
      detail: `${path}: ${bytesRead} of ${size} bytes`,
    };
  } finally {
    await handle.close();
  }
}
