import type { DOGFOOD_GATE_PARTS, DogfoodGateEvidenceRecorded } from "@kiln/contract";
import type { DogfoodGateEvidenceRow, DogfoodGateOpeningRow } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";

export type GatePart = (typeof DOGFOOD_GATE_PARTS)[number];
export type EvidenceSource = "run_record" | "credential" | "workflow_run" | "attested";
type GateDocument = Static<typeof DogfoodGateEvidenceRecorded>["gate"];
type EvidenceDocument = Static<typeof DogfoodGateEvidenceRecorded>["evidence"];

/**
 * The entry gate's conditions and the parts each is made of, with the references each part
 * accepts (rule 9). A part the platform can read from its own records (the run ledger, the
 * dogfood tenant's credentials, the CI provider) takes only such a reference; an https
 * reference an operator attests is accepted only for parts the platform cannot read.
 */
export const GATE_CONDITIONS: readonly {
  readonly condition: string;
  readonly parts: readonly { readonly part: GatePart; readonly accepts: readonly EvidenceSource[] }[];
}[] = [
  {
    condition: "qualification",
    parts: [
      { part: "a0_verdict", accepts: ["run_record", "workflow_run"] },
      { part: "a1_outcomes", accepts: ["run_record", "workflow_run"] },
      { part: "cold_darm_run", accepts: ["run_record"] },
    ],
  },
  {
    condition: "ledger_integrity",
    parts: [
      { part: "no_duplicate_settlement", accepts: ["run_record"] },
      { part: "continuous_observation", accepts: ["run_record"] },
    ],
  },
  {
    condition: "identity_lifecycle",
    parts: [
      { part: "certificate_renewal", accepts: ["attested"] },
      { part: "expired_identity_recovery", accepts: ["attested"] },
    ],
  },
  {
    condition: "recovery",
    parts: [
      { part: "reboot_recovery", accepts: ["attested"] },
      { part: "provider_unavailable_recovery", accepts: ["attested"] },
      { part: "staged_release_reverted", accepts: ["attested"] },
    ],
  },
  {
    condition: "observability",
    parts: [
      { part: "alerts_observed", accepts: ["attested"] },
      { part: "off_host_evidence_observed", accepts: ["attested"] },
    ],
  },
  {
    condition: "transport",
    parts: [
      { part: "transport_qualified_production", accepts: ["run_record", "workflow_run"] },
      { part: "transport_qualified_staging", accepts: ["run_record", "workflow_run"] },
    ],
  },
  { condition: "submitter", parts: [{ part: "submitter_credential", accepts: ["credential"] }] },
];

export function acceptedSources(part: GatePart): readonly EvidenceSource[] {
  for (const c of GATE_CONDITIONS) for (const p of c.parts) if (p.part === part) return p.accepts;
  return [];
}

export function evidenceView(row: DogfoodGateEvidenceRow): EvidenceDocument {
  return {
    part: row.part as GatePart,
    reference: row.reference,
    source: row.source as EvidenceSource,
    expires_at: row.expires_at,
    ...(row.detail === null ? {} : { detail: row.detail }),
    ...(row.produced_at === null ? {} : { produced_at: row.produced_at }),
    verification: JSON.parse(row.verification) as Record<string, unknown>,
    recorded_by: row.recorded_by,
    recorded_at: row.recorded_at,
  };
}

const live = (row: DogfoodGateEvidenceRow, now: Date) =>
  row.expires_at === null || Date.parse(row.expires_at) > now.getTime();

/** Whether every part has evidence that has not expired at `now`. */
export function everyPartMet(evidence: readonly DogfoodGateEvidenceRow[], now: Date): boolean {
  return GATE_CONDITIONS.every((c) => c.parts.every((p) => evidence.some((e) => e.part === p.part && live(e, now))));
}

/**
 * The gate at `now`: each condition's parts with the newest unexpired evidence meeting each, or
 * what it lacks. Once opened the gate stays open (it admits the trial once); a part whose
 * evidence expired afterwards shows what it lacks.
 */
export function gateView(
  evidence: readonly DogfoodGateEvidenceRow[],
  opening: DogfoodGateOpeningRow | undefined,
  now: Date,
): GateDocument {
  const conditions = GATE_CONDITIONS.map((c) => {
    const parts = c.parts.map((p) => {
      const recorded = evidence.filter((e) => e.part === p.part);
      const meeting = recorded.filter((e) => live(e, now)).at(-1);
      const expired = recorded.at(-1);
      return {
        part: p.part,
        evidence: meeting === undefined ? null : evidenceView(meeting),
        lacks:
          meeting !== undefined
            ? null
            : expired !== undefined
              ? `its evidence ${expired.reference} expired at ${expired.expires_at}`
              : `no evidence recorded; accepts ${p.accepts.map((s) => s.replace("_", " ")).join(" or ")}`,
        accepts: [...p.accepts],
      };
    });
    return { condition: c.condition, met: parts.every((p) => p.evidence !== null), parts };
  });
  return {
    state: opening === undefined ? "closed" : "open",
    opened_at: opening?.opened_at ?? null,
    conditions,
  };
}
