import { type Static, Type } from "@sinclair/typebox";
import { Nullable, Timestamp } from "../schema-helpers.js";

/**
 * The host protocol's fleet messages (issue 17 item 5): what an operator asked of a host that
 * runs on the host itself. The host polls for its work (and says which attempts it runs
 * sandboxes for, so the control plane can flag an orphaned one); an operator-started
 * initialization is answered there, and the host reports each step's outcome as it runs.
 * The control plane only records: no step runs on it.
 */

/**
 * An initialization step's name. Each host names its own steps, in the order it runs them: they
 * depend on its isolation (a sandbox host checks bubblewrap, a microVM host KVM, QEMU and its
 * guest images; both their unprivileged user, cgroups and toolchains), so the control plane
 * shows the ledger the host reports rather than a fixed list.
 */
export const HOST_INITIALIZATION_STEP_PATTERN = "^[a-z][a-z0-9_]{0,63}$";
/** The most steps a host reports for one initialization. */
export const MAX_HOST_INITIALIZATION_STEPS = 32;

const HostId = () => Type.String({ minLength: 1, maxLength: 128, description: "The host's identity." });

/** A host's poll for fleet work. */
export const HostFleetPoll = Type.Object(
  {
    hostId: HostId(),
    sandboxes: Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
      maxItems: 4096,
      description: "Attempt ids (`<job>-a<n>`) the host runs a sandbox for now.",
    }),
  },
  { additionalProperties: false },
);
export type HostFleetPoll = Static<typeof HostFleetPoll>;

/** An initialization the host is to run. */
export const HostInitializationOrder = Type.Object(
  {
    operation: Type.String({ minLength: 1, maxLength: 128 }),
    toolchains: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
      description: "rustup toolchains the host must admit.",
    }),
  },
  { additionalProperties: false },
);
export type HostInitializationOrder = Static<typeof HostInitializationOrder>;

/**
 * What an operator asks of a host and waits for: its journal, its kernel log, one evidence
 * file, the bounded evidence export (this boot's journal, unit logs, one attempt's retained
 * files), or `reap_sandbox` — reaping an orphaned sandbox (`path` names its attempt id), which
 * answers the reap receipt's entries as JSON.
 */
export const HOST_READ_KINDS = ["journal", "kernel_log", "evidence", "evidence_export", "reap_sandbox"] as const;
export type HostReadKind = (typeof HOST_READ_KINDS)[number];

/** A read the host is to answer with at most `maxBytes` bytes (the newest, for a log). */
export const HostReadOrder = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 128 }),
    kind: Type.Union(HOST_READ_KINDS.map((k) => Type.Literal(k))),
    path: Nullable(
      Type.String({ minLength: 1, maxLength: 1024 }),
      "For `evidence`: the file, relative to the host's evidence directory.",
    ),
    maxBytes: Type.Integer({ minimum: 1, maximum: 16 * 2 ** 20 }),
    attempt: Nullable(
      Type.Integer({ minimum: 1 }),
      "For `evidence_export`: the attempt number whose retained files to include.",
    ),
    executions: Nullable(
      Type.Integer({ minimum: 1 }),
      "For `evidence_export`: the most unit executions to include, newest first.",
    ),
  },
  { additionalProperties: false },
);
export type HostReadOrder = Static<typeof HostReadOrder>;

export const HostFleetWork = Type.Object(
  {
    initialization: Nullable(HostInitializationOrder, "The initialization to run, or null when none is open."),
    reads: Type.Array(HostReadOrder, { description: "Operator reads waiting for this host's answer, oldest first." }),
  },
  { additionalProperties: false },
);
export type HostFleetWork = Static<typeof HostFleetWork>;

const StepName = Type.String({
  pattern: HOST_INITIALIZATION_STEP_PATTERN,
  description: "The step's name, as the host names it.",
});

/** One step's outcome as the host ran it. */
export const HostInitializationStepOutcome = Type.Object(
  {
    step: StepName,
    state: Type.Union(["pending", "running", "succeeded", "failed", "skipped"].map((s) => Type.Literal(s))),
    startedAt: Nullable(Timestamp()),
    finishedAt: Nullable(Timestamp()),
    detail: Type.String({ maxLength: 4000, description: "What the step found or did, or why it failed." }),
  },
  { additionalProperties: false },
);
export type HostInitializationStepOutcome = Static<typeof HostInitializationStepOutcome>;

/** The host's ledger of an initialization so far (every step, in order). */
export const HostInitializationReport = Type.Object(
  {
    hostId: HostId(),
    operation: Type.String({ minLength: 1, maxLength: 128 }),
    steps: Type.Array(HostInitializationStepOutcome, { maxItems: MAX_HOST_INITIALIZATION_STEPS }),
  },
  { additionalProperties: false },
);
export type HostInitializationReport = Static<typeof HostInitializationReport>;

/** `stale`: the operation is not this host's open initialization any more. */
export const HostInitializationReportAnswer = Type.Object(
  { answer: Type.Union([Type.Literal("accepted"), Type.Literal("stale")]) },
  { additionalProperties: false },
);
export type HostInitializationReportAnswer = Static<typeof HostInitializationReportAnswer>;

/** The host's answer to a read: the bytes (base64), whether older bytes were left out, or why it failed. */
export const HostReadAnswer = Type.Object(
  {
    hostId: HostId(),
    id: Type.String({ minLength: 1, maxLength: 128 }),
    outcome: Type.Union([Type.Literal("answered"), Type.Literal("failed")]),
    content: Type.String({ maxLength: 24 * 2 ** 20, description: "The bytes read, base64; empty when it failed." }),
    truncated: Type.Boolean({ description: "Whether bytes beyond maxBytes were left out (the oldest, for a log)." }),
    detail: Type.String({ maxLength: 4000, description: "What was read, or why it could not be." }),
    refusal: Nullable(
      Type.Union([Type.Literal("not_found"), Type.Literal("conflict")]),
      "Why a failed read failed, where the operator's refusal names it: nothing to read, or the host's state moved while reading.",
    ),
  },
  { additionalProperties: false },
);
export type HostReadAnswer = Static<typeof HostReadAnswer>;

/** `stale`: the read is not waiting any more (answered already, or its wait expired). */
export const HostReadAnswerAck = Type.Object(
  { answer: Type.Union([Type.Literal("accepted"), Type.Literal("stale")]) },
  { additionalProperties: false },
);
export type HostReadAnswerAck = Static<typeof HostReadAnswerAck>;
