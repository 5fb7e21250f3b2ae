import { Type } from "@sinclair/typebox";
import { defineOperation } from "../operation.js";
import { DeviceApprovalReceipt, DeviceAuthorization, DevicePoll, PendingDevice, UserCode } from "../records/device.js";
import { JobEvent } from "../records/jobs.js";
import { OpenApiDocument } from "../records/openapi-document.js";
import { K } from "../refusal-codes.js";

const userCodeQuery = () => Type.Object({ user_code: UserCode() }, { additionalProperties: false });

/** Public and session-only operations (spec table of the same name). */
export const PUBLIC_AND_SESSION_OPERATIONS = [
  defineOperation({
    id: "openapi.document",
    method: "GET",
    path: "/api/openapi.json",
    summary: "The OpenAPI 3.1 document of this API, generated from the operation catalogue.",
    tag: "meta",
    security: { kind: "public" },
    request: {},
    response: { encoding: "json", schema: OpenApiDocument },
    refusals: ["unavailable"],
    keyed: false,
  }),
  defineOperation({
    id: "device.start",
    method: "POST",
    path: "/api/device/start",
    summary: "Start a device authorization (CLI login): returns the device code to poll and the user code to approve.",
    tag: "device",
    security: { kind: "public" },
    request: {},
    response: { encoding: "json", schema: DeviceAuthorization },
    refusals: ["rate_limited", "upstream_failed", "unavailable"],
    keyed: false,
  }),
  defineOperation({
    id: "device.poll",
    method: "GET",
    path: "/api/device/poll",
    summary: "Poll a device authorization; once approved the CLI device token is issued exactly once.",
    tag: "device",
    security: { kind: "public" },
    request: {
      query: Type.Object(
        { device_code: Type.String({ minLength: 1, maxLength: 256, description: "From device.start." }) },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: DevicePoll },
    refusals: ["rate_limited", "unavailable"],
    keyed: false,
  }),
  defineOperation({
    id: "device.pending",
    method: "GET",
    path: "/api/device/pending",
    summary: "The pending device authorization under a user code, for the signed-in person to confirm.",
    tag: "device",
    security: { kind: "session" },
    request: { query: userCodeQuery() },
    response: { encoding: "json", schema: PendingDevice },
    refusals: ["unauthenticated", "session_required", "unavailable"],
    keyed: false,
  }),
  defineOperation({
    id: "device.approve",
    method: "POST",
    path: "/api/device/approve",
    summary: "Approve a device code as the signed-in person; only a human session approves.",
    tag: "device",
    security: { kind: "session" },
    request: { query: userCodeQuery() },
    response: { encoding: "json", schema: DeviceApprovalReceipt },
    refusals: ["unauthenticated", "session_required", "invalid_request", ...K],
    keyed: true,
  }),
  defineOperation({
    id: "events.stream",
    method: "GET",
    path: "/api/events",
    summary: "Dashboard hints: job transitions for the session's tenant, reconciled against authoritative reads.",
    tag: "events",
    security: { kind: "session" },
    request: {},
    response: {
      encoding: "sse",
      description: "Server-sent events named `job`, one per job transition of the session's tenant; no resume.",
      event: JobEvent,
    },
    refusals: ["unauthenticated", "session_required", "rate_limited"],
    keyed: false,
  }),
];
