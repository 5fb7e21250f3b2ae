import type { Clock } from "@kiln/contract";
import type { BlobStore, JobNotifications, Storage } from "@kiln/storage";
import type { CanarySettings } from "../../domain/platform/canaries/canary-settings.js";
import type { SecretBox } from "../../domain/secrets/secret-box.js";
import type { GitHubApp } from "../../domain/source-hosting/github-app.js";
import type { LastUsedRecorder } from "../auth/last-used-recorder.js";
import type { OidcSettings } from "../auth/oidc-client.js";
import type { LargeBodies } from "./body-parsers.js";
import type { TenantIngress } from "./tenant-ingress-shaper.js";

/** Everything buildApp needs from the outside world; main.ts wires the real ones. */
export interface AppDeps {
  readonly storage: Storage;
  /** Source, output and artifact bytes, addressed by SHA-256. */
  readonly blobs: BlobStore;
  /**
   * The platform's wall-clock ceiling for jobs, in seconds (default 3600, also the
   * maximum). The repository setting that lowers it arrives with repository settings.
   */
  readonly wallClockSeconds?: number;
  /**
   * The tenant storage quota for lineages, in bytes (default PLATFORM_STORAGE_QUOTA_BYTES in
   * domain/repositories/storage-quota.ts). Give the local host the same value.
   */
  readonly storageQuotaBytes?: number;
  /**
   * How long a queued job waits for the live host holding its lineage before any host takes it
   * (KILN_LINEAGE_AFFINITY_SECONDS; default DEFAULT_LINEAGE_AFFINITY_SECONDS in domain/hosts/host-service.ts).
   * Give the local host the same value.
   */
  readonly lineageAffinitySeconds?: number;
  /** Nudges the scheduler after a submission or cancellation (the local host polls otherwise). */
  readonly wakeScheduler?: () => void;
  /** The clock every part of the app reads time from and schedules on. */
  readonly clock: Clock;
  /**
   * The origin people and devices reach kiln at (KILN_PUBLIC_URL), used in sign-in
   * links and verification URIs and to recognise kiln's own pages.
   */
  readonly publicOrigin: string;
  /**
   * Seals secrets kept for reuse (tenants' registry credentials) under the master key;
   * main.ts makes it from KILN_MASTER_KEY or `<data dir>/master.key`.
   */
  readonly secrets?: SecretBox;
  /**
   * The OpenID Connect identity provider people sign in with (KILN_OIDC_ISSUER, …); absent,
   * one-time sign-in links are the only way in.
   */
  readonly oidc?: OidcSettings;
  /**
   * What wakes log and event streams when another writer commits (storage notifications: a
   * LISTEN connection on PostgreSQL, this process's bus on SQLite); buildApp starts one when
   * absent and stops it on close. main.ts shares one with the local host's claim wait.
   */
  readonly notifications?: JobNotifications;
  /** Coalesces last_used_at writes; buildApp makes one when absent. */
  readonly lastUsed?: LastUsedRecorder;
  /**
   * Worker threads reading large JSON bodies off the event loop (KILN_BODY_WORKERS; default one
   * or two, the cores the event loop leaves; 0 reads every body on the event loop): see
   * web/http/body-parsers.ts.
   */
  readonly bodyWorkers?: number;
  /**
   * How many large requests (a body over 256 KiB) one tenant may have in flight in this process
   * (KILN_LARGE_REQUESTS_PER_TENANT, default 2); more at once are refused rate_limited.
   */
  readonly largeRequestsPerTenant?: number;
  /**
   * Each tenant's request bodies read at most this fast in this process, bursts of burstBytes at
   * full speed (KILN_TENANT_INGRESS_BYTES_PER_SECOND and KILN_TENANT_INGRESS_BURST_BYTES; absent:
   * unbounded): see web/http/tenant-ingress-shaper.ts.
   */
  readonly tenantIngress?: TenantIngress;
  /**
   * The body workers and per-tenant bound themselves (tests inspect them); buildApp makes them
   * from bodyWorkers and largeRequestsPerTenant when absent, and closes only what it made. The
   * workers also parse the TOML files jobs.submit's admission reads (jobs/admission-source.ts).
   */
  readonly largeBodies?: LargeBodies;
  /** Version string served in the OpenAPI document. */
  readonly version: string;
  /**
   * Test-only: validate every response against its declared schema and answer 500
   * with the violation when it drifts, so no handler can drift from the contract.
   */
  readonly checkResponses?: boolean;
  /** pino logger options, or false for none. */
  readonly logger?: boolean | Record<string, unknown>;
  /**
   * The source-hosting provider (a GitHub App through Octokit, domain/source-hosting/github-app.ts),
   * when one is configured (KILN_GITHUB_APP_*): installation claims, merge bases, check runs.
   */
  readonly gitHubApp?: GitHubApp;
  /**
   * KILN_DOGFOOD_TENANT: the tenant whose jobs the dogfood trial observes as its shadow and head
   * run records (default DEFAULT_DOGFOOD_TENANT in domain/platform/platform-tenants.ts).
   */
  readonly dogfoodTenant?: string;
  /**
   * How often canaries are due and when one is late (KILN_CANARY_INTERVAL_SECONDS); workload
   * health judges canaries by it whether or not this process runs the canary loop. Default:
   * every 300 s, late after one interval.
   */
  readonly canaries?: CanarySettings;
}
