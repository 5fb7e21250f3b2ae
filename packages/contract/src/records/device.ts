import { Type } from "@sinclair/typebox";
import { Closed, Open, Timestamp } from "../schema-helpers.js";

/** A user code as shown to the person approving it. */
export const UserCode = (description = "The user code a person confirms, e.g. `WDJB-MJHT`.") =>
  Type.String({ minLength: 1, maxLength: 64, description });

export const DeviceAuthorization = Closed(
  "DeviceAuthorization",
  {
    device_code: Type.String({
      description: "Secret code the device polls device.poll with; never shown to the person.",
    }),
    user_code: UserCode(),
    verification_uri: Type.String({ description: "Approval page naming the user code, opened by the person." }),
    expires_at: Timestamp("When the authorization expires unapproved."),
    interval_seconds: Type.Integer({ minimum: 1, description: "Seconds to wait between polls." }),
    requesting_host: Type.String({ description: "The host the request came from, shown on the approval page." }),
  },
  { description: "A started device authorization (CLI login)." },
);

export const DevicePoll = Open(
  "DevicePoll",
  {
    state: Type.Union(
      [Type.Literal("pending"), Type.Literal("approved"), Type.Literal("expired"), Type.Literal("limited")],
      {
        description:
          "pending: not yet approved, poll again after interval_seconds; approved: `token` is issued (once); expired: start again; limited: polled too fast, wait retry_after_seconds.",
      },
    ),
    token: Type.Optional(
      Type.String({
        pattern: "^kiln_cli_",
        description:
          "The CLI device token (`kiln_cli_…`), present only with state approved and issued exactly once: a later poll of the same device code no longer carries it.",
      }),
    ),
    interval_seconds: Type.Optional(Type.Integer({ minimum: 1, description: "Seconds to wait before the next poll." })),
    retry_after_seconds: Type.Optional(
      Type.Integer({ minimum: 0, description: "With state limited: seconds to wait before polling again." }),
    ),
    expires_at: Type.Optional(Timestamp("When the device authorization expires.")),
  },
  { description: "The state of a device authorization as seen by the polling device." },
);

export const PendingDeviceView = Closed(
  "PendingDeviceView",
  {
    user_code: UserCode(),
    requesting_host: Type.String({ description: "The host that started the authorization." }),
    expires_at: Timestamp("When the authorization expires unapproved."),
  },
  { description: "A pending device authorization awaiting the signed-in person's approval." },
);

export const PendingDevice = Type.Union([PendingDeviceView, Type.Null()], {
  title: "PendingDevice",
  description: "The pending device authorization for the user code, or null when none is pending under it.",
});

export const DeviceApprovalReceipt = Closed(
  "DeviceApprovalReceipt",
  {
    user_code: UserCode("The approved user code."),
    approved_by: Type.String({ description: "User id of the person who approved it." }),
  },
  { description: "A device approval; the device's next poll receives the token." },
);
