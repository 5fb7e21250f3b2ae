export type { AttemptDirectories, AttemptRunnerDeps } from "./agent/attempt/attempt-context.js";
export { type AttemptEnd, runAttempt } from "./agent/attempt/run-attempt.js";
export { cargoArgv } from "./agent/attempt/run-cargo.js";
export * from "./agent/attempt-evidence.js";
export { AttemptLineage, SANDBOX_MOUNTS } from "./agent/attempt-lineage.js";
export * from "./agent/cargo-output-observer.js";
export { FLEET_POLL_EVERY_MS, FleetChannel } from "./agent/fleet-channel.js";
export * from "./agent/host-agent.js";
export type { HostEvent, HostReporting } from "./agent/host-events.js";
export * from "./agent/host-protocol.js";
export { type HostReadResult, type HostReads, realHostReads } from "./agent/host-reads.js";
export * from "./agent/lineage-store.js";
export { measureTreeBytes } from "./agent/measure-tree-bytes.js";
export { runHostInitialization } from "./agent/run-host-initialization.js";
export { chooseScratchRoot } from "./agent/scratch-root.js";
export * from "./agent/source-mtimes.js";
export { type MachineHostOptions, startMachineHost } from "./agent/start-machine-host.js";
export * from "./evidence/index.js";
export * from "./executor/executor.js";
export type { HostIsolation, InitializationStep, IsolationChoice, TargetFile } from "./executor/host-isolation.js";
export { MICROVM_TARGET_DISK_FILE } from "./executor/microvm/guest-disks.js";
export { type GuestArtifact, GuestImages } from "./executor/microvm/guest-images.js";
export {
  createMicrovmExecutor,
  MicrovmExecutor,
  type MicrovmExecutorOptions,
} from "./executor/microvm/microvm-executor.js";
export {
  type MicrovmHostIsolation,
  type MicrovmIsolationOptions,
  microvmIsolation,
} from "./executor/microvm/microvm-isolation.js";
export { type ProbeResult, probeGuest } from "./executor/microvm/probe-guest.js";
export { createSandboxExecutor, type SandboxExecutorOptions } from "./executor/sandbox/sandbox-executor.js";
export { type SandboxIsolationOptions, sandboxIsolation } from "./executor/sandbox/sandbox-isolation.js";
export { sandboxSeccompProgram } from "./executor/sandbox/seccomp-filter.js";
export {
  DEFAULT_PROBE_SECONDS,
  type IsolationSettings,
  isolationSettingsFromEnv,
  selectHostIsolation,
} from "./executor/select-isolation.js";
export {
  admitToolchain,
  hostTriple,
  type InstalledToolchain,
  listAdmittedToolchains,
  resolveToolchain,
  ToolchainNotAdmittedError,
  type ToolchainOptions,
} from "./executor/shared/admit-toolchains.js";
export {
  AttemptCgroup,
  type AttemptCgroupOptions,
  CgroupUnavailableError,
  type CgroupUsage,
  type EnforcedLimits,
} from "./executor/shared/attempt-cgroup.js";
export {
  type CgroupHierarchy,
  type CgroupLayout,
  type CgroupLayoutKind,
  cgroupDirectory,
  describeCgroupLayout,
  detectCgroupLayout,
  NO_CGROUPS,
  parseCgroupLayout,
  parseProcessCgroups,
} from "./executor/shared/cgroup-layout.js";
export { releaseKeptDisksUnder } from "./executor/shared/kept-target-disk.js";
export { type AttemptReaper, attemptReaper, type ReapEntry } from "./executor/shared/reap-attempt.js";
export { reapStaleAttempts } from "./executor/shared/reap-stale-attempts.js";
export { removeJobDirectories } from "./executor/shared/remove-job-directories.js";
export { TARGET_DISK_FILE, withTargetTree } from "./executor/shared/target-disk.js";
export { type CachedCrate, CrateCache, type CrateFetch } from "./gateway/crate-cache.js";
export {
  DEFAULT_CRATE_CACHE_BYTES,
  DependencyGateway,
  type GatewayConfig,
  type GatewayEgress,
  type ProvidedDependencies,
  type ProvideRequest,
} from "./gateway/dependency-gateway.js";
export {
  type AllowEntry,
  EgressPolicy,
  type EgressRules,
  type OwnListener,
  parseGatewayAllow,
  type Resolver,
  specialUseOf,
} from "./gateway/egress-policy.js";
export { DEFAULT_FETCH_BOUNDS, type FetchBounds } from "./gateway/fetch-bounds.js";
export { GatewayError, type GatewayErrorKind } from "./gateway/gateway-error.js";
export {
  cratesIoIndexOf,
  DEFAULT_CRATES_IO_INDEX,
  type GatewayEgressSettings,
  gatewayEgressOf,
} from "./gateway/gateway-settings.js";
export { type DependencyProvider, WorkerGateway } from "./gateway/worker-gateway.js";
export { BareMetalApiError, BareMetalClient, fingerprintOf } from "./operator/bare-metal-client.js";
export { BareMetalRecoveryProvider } from "./operator/bare-metal-recovery-provider.js";
export {
  HostOperator,
  type HostOperatorEvent,
  type HostOperatorOptions,
  startHostOperator,
} from "./operator/host-operator.js";
export { type HostOperatorClient, httpHostOperatorClient } from "./operator/host-operator-client.js";
export { LocalRecoveryProvider } from "./operator/local-recovery-provider.js";
export type { LedgerEntry, RecoveryProvider, RecoveryRequest, StepResult } from "./operator/recovery-provider.js";
export { ProcessSupervisor, type ServiceSupervisor } from "./operator/service-supervisor.js";
export {
  type CertificateRenewal,
  type RenewalEvent,
  renewalDueAt,
  startCertificateRenewal,
} from "./remote/certificate-renewal.js";
export { HEALTH_REPORTED_MESSAGE, startHealthReporter } from "./remote/health-reporter.js";
export { loadHostIdentity } from "./remote/host-enrollment.js";
export {
  certificateSha256,
  type HostTlsFiles,
  HostTlsIdentity,
  type HostTlsMaterial,
  newKeyAndSigningRequest,
  tlsFilesIn,
} from "./remote/host-tls-identity.js";
export {
  fetchCaCertificate,
  HostProtocolRefusal,
  type HttpHostProtocolOptions,
  hostIdentityOf,
  httpHostProtocol,
  requestEnrollment,
  requestRenewal,
} from "./remote/http-host-protocol.js";
export { type HostFetch, httpsFetch } from "./remote/https-fetch.js";
export {
  type KilnHostOverrides,
  kilnHostConfigFromEnv,
  type RunningKilnHost,
  startKilnHost,
} from "./remote/kiln-host.js";
export type { KilnHostConfig } from "./remote/kiln-host-config.js";
