export { agentOnExecutor } from "./agent-on-executor.js";
export { agentWithoutExecutor } from "./agent-without-executor.js";
export { cgroupDirectoriesNamed } from "./cgroup-directories.js";
export { commitRepository, type GitServer, startGitServer } from "./git-server.js";
export {
  gzipBomb,
  type HostileDownload,
  makeTestTls,
  type RecordedRequest,
  type RecordingServer,
  startHostileRegistry,
  startRecordingServer,
  type TestTls,
  type UpstreamHandler,
} from "./hostile-upstreams.js";
export { InMemoryExecutor, type ScriptedRun } from "./in-memory-executor.js";
export { KILN_HOST_BIN } from "./kiln-host-bin.js";
export {
  type SkippedDependency,
  type SparseRegistry,
  type SparseRegistryCrate,
  type SparseRegistryOptions,
  sparseIndexPath,
  startSparseRegistry,
} from "./sparse-registry.js";
