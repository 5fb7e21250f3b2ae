import type { HandlerTable } from "../http/handler.js";
import { getHostActivations } from "./operator/operator-activations.js";
import { disposeAnomaly, listAnomalies } from "./operator/operator-anomalies.js";
import { exportOperatorAudit, listOperatorAudit, refuseOperatorAuditChange } from "./operator/operator-audit.js";
import { canaryAttribution } from "./operator/operator-canaries.js";
import { registerDeployment } from "./operator/operator-deployments.js";
import { dogfoodPeriod, dogfoodRecord, recordGateEvidence } from "./operator/operator-dogfood.js";
import {
  declareMaintenance,
  recordIntervention,
  recordLifecycleChange,
  recordSpend,
} from "./operator/operator-dogfood-declarations.js";
import { recordIncident, recordIncidentIssue, resolveIncident } from "./operator/operator-dogfood-incidents.js";
import { hostHistory } from "./operator/operator-host-history.js";
import { hostEvidence, hostEvidenceExport, hostJournal, hostKernelLog } from "./operator/operator-host-reads.js";
import { drainHostHandler, getHost, listHosts, undrainHostHandler } from "./operator/operator-hosts.js";
import { listIdentities } from "./operator/operator-identities.js";
import { approveHostIncidentStep, closeHostIncidentHandler } from "./operator/operator-incidents.js";
import { observeInitialization, startInitialization } from "./operator/operator-initialization.js";
import { listPlacements, placementReceipt, reconcilePlacement } from "./operator/operator-placements.js";
import { disposePlatformAnomalyHandler, listPlatformAnomaliesHandler } from "./operator/operator-platform-anomalies.js";
import { platformStates } from "./operator/operator-platform-states.js";
import {
  getHostRecovery,
  invokeHostRecoveryHandler,
  setHostRecoveryPolicyHandler,
} from "./operator/operator-recovery.js";
import { createOperatorSession, deleteOperatorSession } from "./operator/operator-session.js";
import { getTenantControls, listOperatorTenants, setTenantControls } from "./operator/tenant-controls.js";
import { listAudit } from "./tenant/audit.js";
import { listOwnCliTokens, revokeOwnCliToken } from "./tenant/cli-tokens.js";
import { createCredential, listCredentials, revokeCredential } from "./tenant/credentials.js";
import { approveDevice, pendingDevice, pollDevice, startDevice } from "./tenant/device.js";
import { cliTenant, currentIdentity } from "./tenant/identity.js";
import { jobArtifactBytes, jobArtifacts } from "./tenant/job-artifacts.js";
import { cliEvents, dashboardEvents } from "./tenant/job-events.js";
import { jobCargoOutput, jobEvidence } from "./tenant/job-evidence.js";
import { jobLogs, jobLogsSearch, jobLogsStream } from "./tenant/job-logs.js";
import { cancelJob, getJob, listTenantJobs, retryJob, submitJob } from "./tenant/jobs.js";
import { claimOnboardingInstallation, onboardingSurface } from "./tenant/onboarding.js";
import { openapiDocument } from "./tenant/openapi-document.js";
import { refusePredecessorSubmission } from "./tenant/predecessor-submissions.js";
import { replaceTenantRegistryCredential } from "./tenant/registry-credentials.js";
import {
  dismissRepositoryAdvisory,
  getRepository,
  listRepositories,
  onboardRepositoryHandler,
  purgeRepositoryLineage,
  repositoryTests,
} from "./tenant/repositories.js";
import { repositoryAdmission } from "./tenant/repository-admission.js";
import { getRepositorySettings, writeRepositorySettingsHandler } from "./tenant/repository-settings.js";
import {
  checkSourceChunk,
  completeSource,
  putSourceChunk,
  reserveSource,
  sourceCapabilities,
  sourceStatus,
} from "./tenant/sources.js";
import { getTenantSettings, writeTenantSettingsHandler } from "./tenant/tenant-settings.js";
import { usageExport, usageReport } from "./tenant/usage.js";

/** Operation id → handler; every catalogued id missing here answers not_implemented. */
export const defaultHandlers: HandlerTable = {
  "openapi.document": openapiDocument,
  "jobs.submit_predecessor_v1": refusePredecessorSubmission,
  "jobs.submit_predecessor_v2": refusePredecessorSubmission,
  "jobs.submit_predecessor_v3": refusePredecessorSubmission,
  "device.start": startDevice,
  "device.poll": pollDevice,
  "device.pending": pendingDevice,
  "device.approve": approveDevice,
  "identity.current": currentIdentity,
  "cli.tenant": cliTenant,
  "onboarding.surface": onboardingSurface,
  "onboarding.claim": claimOnboardingInstallation,
  "jobs.submit": submitJob,
  "jobs.get": getJob,
  "jobs.list": listTenantJobs,
  "jobs.cancel": cancelJob,
  "jobs.retry": retryJob,
  "jobs.logs": jobLogs,
  "jobs.logs_stream": jobLogsStream,
  "jobs.logs_search": jobLogsSearch,
  "jobs.evidence": jobEvidence,
  "jobs.cargo_output": jobCargoOutput,
  "jobs.artifacts": jobArtifacts,
  "jobs.artifact_bytes": jobArtifactBytes,
  "repositories.list": listRepositories,
  "repositories.get": getRepository,
  "repositories.lineages.purge": purgeRepositoryLineage,
  "repositories.onboard": onboardRepositoryHandler,
  "repositories.tests": repositoryTests,
  "repositories.admission": repositoryAdmission,
  "repositories.settings.get": getRepositorySettings,
  "repositories.settings.write": writeRepositorySettingsHandler,
  "sources.capabilities": sourceCapabilities,
  "sources.reserve": reserveSource,
  "sources.status": sourceStatus,
  "sources.chunk.put": putSourceChunk,
  "sources.chunk.check": checkSourceChunk,
  "sources.complete": completeSource,
  "repositories.advisories.dismiss": dismissRepositoryAdvisory,
  "cli.events": cliEvents,
  "events.stream": dashboardEvents,
  "cli_tokens.list": listOwnCliTokens,
  "cli_tokens.revoke": revokeOwnCliToken,
  "credentials.create": createCredential,
  "credentials.list": listCredentials,
  "credentials.revoke": revokeCredential,
  "audit.list": listAudit,
  "tenant.registry_credential.replace": replaceTenantRegistryCredential,
  "operator.session.create": createOperatorSession,
  "operator.session.delete": deleteOperatorSession,
  "operator.audit.list": listOperatorAudit,
  "operator.audit.export": exportOperatorAudit,
  "operator.audit.refuse_patch": refuseOperatorAuditChange,
  "operator.audit.refuse_delete": refuseOperatorAuditChange,
  "tenant.settings.get": getTenantSettings,
  "tenant.settings.write": writeTenantSettingsHandler,
  "operator.tenants.list": listOperatorTenants,
  "operator.tenants.controls.get": getTenantControls,
  "operator.tenants.controls.set": setTenantControls,
  "operator.hosts.list": listHosts,
  "operator.hosts.get": getHost,
  "operator.hosts.drain": drainHostHandler,
  "operator.hosts.undrain": undrainHostHandler,
  "operator.hosts.history": hostHistory,
  "operator.hosts.deployment.register": registerDeployment,
  "operator.hosts.initialization.start": startInitialization,
  "operator.hosts.initialization.observe": observeInitialization,
  "operator.placements.list": listPlacements,
  "operator.placements.reconcile": reconcilePlacement,
  "operator.placements.receipt": placementReceipt,
  "operator.hosts.journal": hostJournal,
  "operator.hosts.kernel_log": hostKernelLog,
  "operator.hosts.evidence": hostEvidence,
  "operator.hosts.evidence_export": hostEvidenceExport,
  "operator.identities.list": listIdentities,
  "operator.platform.states": platformStates,
  "operator.canaries.attribution": canaryAttribution,
  "operator.anomalies.list": listAnomalies,
  "operator.anomalies.disposition": disposeAnomaly,
  "operator.dogfood.period": dogfoodPeriod,
  "operator.dogfood.records.get": dogfoodRecord,
  "operator.dogfood.gate.record": recordGateEvidence,
  "operator.dogfood.incidents.record": recordIncident,
  "operator.dogfood.incidents.issue": recordIncidentIssue,
  "operator.dogfood.incidents.resolve": resolveIncident,
  "operator.dogfood.maintenance.declare": declareMaintenance,
  "operator.dogfood.interventions.record": recordIntervention,
  "operator.dogfood.lifecycle.record": recordLifecycleChange,
  "operator.dogfood.spend.record": recordSpend,
  "usage.report": usageReport,
  "usage.export": usageExport,
  "operator.anomalies.platform.list": listPlatformAnomaliesHandler,
  "operator.anomalies.platform.disposition": disposePlatformAnomalyHandler,
  "operator.hosts.recovery.get": getHostRecovery,
  "operator.hosts.recovery.invoke": invokeHostRecoveryHandler,
  "operator.hosts.recovery.policy.set": setHostRecoveryPolicyHandler,
  "operator.hosts.incidents.approve": approveHostIncidentStep,
  "operator.hosts.incidents.close": closeHostIncidentHandler,
  "operator.hosts.activations.get": getHostActivations,
};
