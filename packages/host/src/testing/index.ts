export { cgroupDirectoriesNamed } from "./cgroup-directories.js";
export { InMemoryExecutor, type ScriptedRun } from "./in-memory-executor.js";
export {
  type SkippedDependency,
  type SparseRegistry,
  type SparseRegistryCrate,
  type SparseRegistryOptions,
  sparseIndexPath,
  startSparseRegistry,
} from "./sparse-registry.js";
