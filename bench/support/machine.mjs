// The machine a bench ran on, for the head of its results.
import { execFileSync } from "node:child_process";
import { cpus, totalmem } from "node:os";

/** CPUs, memory, cargo and node versions, and the date. */
export function describeMachine() {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "unknown",
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    cargo: execFileSync("cargo", ["--version"], { encoding: "utf8" }).trim(),
    node: process.version,
    date: new Date().toISOString(),
  };
}
