import { listAudit } from "./audit.js";
import { listOwnCliTokens, revokeOwnCliToken } from "./cli-tokens.js";
import { createCredential, listCredentials, revokeCredential } from "./credentials.js";
import { approveDevice, pendingDevice, pollDevice, startDevice } from "./device.js";
import type { HandlerTable } from "./handler.js";
import { cliTenant, currentIdentity } from "./identity.js";
import { jobArtifactBytes, jobArtifacts } from "./job-artifacts.js";
import { cliEvents, dashboardEvents } from "./job-events.js";
import { jobCargoOutput, jobEvidence } from "./job-evidence.js";
import { jobLogs, jobLogsStream } from "./job-logs.js";
import { cancelJob, getJob, listTenantJobs, retryJob, submitJob } from "./jobs.js";
import { claimOnboardingInstallation, onboardingSurface } from "./onboarding.js";
import { openapiDocument } from "./openapi-document.js";
import { exportOperatorAudit, listOperatorAudit, refuseOperatorAuditChange } from "./operator-audit.js";
import { drainHostHandler, getHost, listHosts, listIdentities, undrainHostHandler } from "./operator-hosts.js";
import { createOperatorSession, deleteOperatorSession } from "./operator-session.js";
import { refusePredecessorSubmission } from "./predecessor-submissions.js";
import { replaceTenantRegistryCredential } from "./registry-credentials.js";
import { dismissRepositoryAdvisory, getRepository, listRepositories, purgeRepositoryLineage } from "./repositories.js";
import { repositoryAdmission } from "./repository-admission.js";
import { getRepositorySettings, writeRepositorySettingsHandler } from "./repository-settings.js";
import {
  checkSourceChunk,
  completeSource,
  putSourceChunk,
  reserveSource,
  sourceCapabilities,
  sourceStatus,
} from "./sources.js";
import { getTenantControls, setTenantControls } from "./tenant-controls.js";
import { getTenantSettings, writeTenantSettingsHandler } from "./tenant-settings.js";
import { usageExport, usageReport } from "./usage.js";

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
  "jobs.evidence": jobEvidence,
  "jobs.cargo_output": jobCargoOutput,
  "jobs.artifacts": jobArtifacts,
  "jobs.artifact_bytes": jobArtifactBytes,
  "repositories.list": listRepositories,
  "repositories.get": getRepository,
  "repositories.lineages.purge": purgeRepositoryLineage,
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
  "operator.tenants.controls.get": getTenantControls,
  "operator.tenants.controls.set": setTenantControls,
  "operator.hosts.list": listHosts,
  "operator.hosts.get": getHost,
  "operator.hosts.drain": drainHostHandler,
  "operator.hosts.undrain": undrainHostHandler,
  "operator.identities.list": listIdentities,
  "usage.report": usageReport,
  "usage.export": usageExport,
};
