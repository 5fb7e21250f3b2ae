import { type Static, Type } from "@sinclair/typebox";
import { Nullable } from "../schema-helpers.js";
import { Injection } from "./host-protocol.js";
import { Sha256Hex } from "./sources.js";
import { FlakyPolicySetting, FlakyRetriesSetting } from "./test-evidence.js";

/**
 * What admission decided for a job and snapshotted on it (`jobs.admitted`): the toolchain
 * and its origin, the network policy, the repository settings version, the injected build
 * settings (with the environment an applied one sets), the wall-clock ceiling and
 * affected_tests. The Placement is assembled from it; JobEvidence's `admitted` shows it
 * without the injections (those are the report's own `injections`).
 */
export const JobAdmission = Type.Object(
  {
    toolchain: Type.String({ description: "The admitted toolchain, e.g. `1.85.0`." }),
    toolchain_origin: Type.Union(
      [Type.Literal("invocation"), Type.Literal("rust-toolchain-file"), Type.Literal("host-default")],
      {
        description:
          "invocation: named in the request; rust-toolchain-file: the source's rust-toolchain.toml; host-default: the host's stable.",
      },
    ),
    network_policy: Type.Union([Type.Literal("offline"), Type.Literal("dependency-gateway")], {
      description:
        "offline: every dependency is inside the captured workspace; dependency-gateway: the host provides the locked packages from outside it (the job itself still has no network).",
    }),
    network_policy_reason: Type.Optional(Type.String({ description: "Why admission decided that policy, in words." })),
    configuration_sha256: Nullable(
      Sha256Hex(),
      "SHA-256 of the generated dependency configuration; null unless dependency-gateway.",
    ),
    settings_version: Type.Integer({
      minimum: 0,
      description: "The repository settings version admission snapshotted for this job.",
    }),
    injections: Type.Array(Injection),
    wall_clock_ceiling: Type.Object(
      {
        seconds: Type.Integer({ minimum: 1 }),
        origin: Type.String({
          description:
            "repository configuration (the source's Cargo.toml pins it), dashboard repository setting, or platform default.",
        }),
      },
      { additionalProperties: false, description: "The ceiling the job carries and where it comes from." },
    ),
    affected_tests: Type.Boolean({
      description: "Whether the repository's affected_tests setting was on at admission.",
    }),
    lineage_seeding: Type.Optional(
      Type.Boolean({
        description:
          "Whether the repository's lineage_seeding setting was on at admission (kiln extension; absent on jobs admitted before it: on).",
      }),
    ),
    flaky_retries: Type.Optional(FlakyRetriesSetting()),
    flaky_policy: Type.Optional(FlakyPolicySetting()),
  },
  { additionalProperties: true },
);
export type JobAdmission = Static<typeof JobAdmission>;
