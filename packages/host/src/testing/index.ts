export { cgroupDirectoriesNamed } from "./cgroup-directories.js";
export { InMemoryExecutor, type ScriptedRun } from "./in-memory-executor.js";
