export { type AlignBlock, type AlignInput, type AlignRun, alignTestRuns } from "./align-test-runs.js";
export * from "./build-units.js";
export * from "./cargo-messages.js";
export {
  CargoStderrReader,
  type CompilingLine,
  type FailedUnit,
  type StderrRun,
  type StderrRunKind,
  type StderrSnapshot,
} from "./cargo-stderr.js";
export * from "./libtest-output.js";
export * from "./package-id.js";
export * from "./parse-cargo-output.js";
export * from "./report-items.js";
export * from "./test-binaries.js";
