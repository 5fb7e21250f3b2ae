import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ContendRequest } from "./fixtures/contend.js";

const CONTEND_SCRIPT = fileURLToPath(new URL("./fixtures/contend.js", import.meta.url));

/** Runs `fixtures/contend.js` in a separate Node process and returns its parsed JSON output. */
export function runContender<T>(request: ContendRequest): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CONTEND_SCRIPT, JSON.stringify(request)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) {
        reject(new Error(`contender exited with ${code}:\n${stderr}`));
        return;
      }
      try {
        resolve(JSON.parse(stdout) as T);
      } catch (error) {
        reject(new Error(`contender printed no JSON (${String(error)}):\n${stdout}\n${stderr}`));
      }
    });
  });
}
