// The configuration of a `kiln-host` in a module of its own: host-enrollment.ts reads its TLS and
// enrollment members and kiln-host.ts starts from it, so neither imports the other for it.
import type { IsolationSettings } from "../executor/select-isolation.js";
import type { GatewayEgressSettings } from "../gateway/gateway-settings.js";
import type { HostTlsFiles } from "./host-tls-identity.js";

/** What a `kiln-host` needs: where its control plane is, who it is, where it keeps its work. */
export interface KilnHostConfig {
  /** KILN_ENDPOINT: the control plane's host listener, `https://…` (its KILN_HOST_LISTEN). */
  readonly endpoint: string;
  /**
   * KILN_HOST_ENROLLMENT_TOKEN: the one-time bootstrap credential, redeemed for the host's first
   * certificate when it has none (or its certificate was revoked or expired); ignored otherwise.
   */
  readonly enrollmentToken: string | undefined;
  /**
   * KILN_HOST_CA_SHA256: the SHA-256 of kiln's host CA certificate (as `kiln-server admin host
   * enrollment-token` prints it); the host refuses to enroll with a control plane presenting
   * another. Without it the first CA seen is trusted and pinned (logged with its digest).
   */
  readonly caSha256: string | undefined;
  /** `<data dir>/tls/`: the host's key and certificate, and the pinned CA (mode 0600). */
  readonly tlsFiles: HostTlsFiles;
  /** KILN_HOST_DATA_DIR (default `./.kiln-host`): attempts/, lineages/, crates/ and tls/ live here. */
  readonly dataDir: string;
  /** KILN_HOST_VCPUS: vCPU slots offered (default: the machine's). */
  readonly vcpus: number;
  /** KILN_CRATES_IO_INDEX: the sparse index standing for crates.io in the dependency gateway. */
  readonly cratesIoIndex: string;
  /** KILN_GATEWAY_ALLOW, KILN_GATEWAY_GIT_SSH, KILN_GATEWAY_LOOPBACK_HTTP_CREDENTIALS, KILN_GATEWAY_CA_FILE. */
  readonly gateway?: GatewayEgressSettings;
  /** KILN_EXECUTOR, KILN_MICROVM_ACCEL, …: how the host chooses its isolation (select-isolation.ts). */
  readonly isolation: IsolationSettings;
}
