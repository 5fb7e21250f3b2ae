/**
 * Run record identities (spec, operator.dogfood.records.get): `probe:<job>` for a canary job,
 * `head:<owner/name>@<sha>` for the dogfood job that first checked a head commit, `shadow:<job>`
 * for every other dogfood job; `#n` names attempt n > 1 of it.
 */
export type RunRecordKind = "shadow" | "probe" | "head";

export type ParsedRunRecordId =
  | { readonly kind: "shadow" | "probe"; readonly job: string; readonly attempt: number }
  | { readonly kind: "head"; readonly repository: string; readonly sha: string; readonly attempt: number };

const SHAPE = /^(shadow|probe):([^#\s]+)(?:#(\d+))?$/;
const HEAD_SHAPE = /^head:([A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100})@([^#\s]+)(?:#(\d+))?$/;

/** The identity's parts, or null when it is not a run record identity (`#1` is not: attempt 1 has no suffix). */
export function parseRunRecordId(id: string): ParsedRunRecordId | null {
  const head = HEAD_SHAPE.exec(id);
  const plain = head === null ? SHAPE.exec(id) : null;
  const suffix = head?.[3] ?? plain?.[3];
  const attempt = suffix === undefined ? 1 : Number(suffix);
  if (!Number.isSafeInteger(attempt) || (suffix !== undefined && attempt < 2)) return null;
  if (head !== null) return { kind: "head", repository: head[1] ?? "", sha: head[2] ?? "", attempt };
  if (plain === null) return null;
  return { kind: plain[1] as "shadow" | "probe", job: plain[2] ?? "", attempt };
}

export function formatRunRecordId(
  base:
    | { readonly kind: "shadow" | "probe"; readonly job: string }
    | { readonly kind: "head"; readonly repository: string; readonly sha: string },
  attempt: number,
): string {
  const stem = base.kind === "head" ? `head:${base.repository}@${base.sha}` : `${base.kind}:${base.job}`;
  return attempt > 1 ? `${stem}#${attempt}` : stem;
}
