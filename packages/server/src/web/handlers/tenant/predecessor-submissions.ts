import type { CatalogueEntry, ResponseDocumentOf } from "@kiln/contract";
import { refuse } from "../../../domain/refusal.js";
import type { BaseContext } from "../../http/handler.js";

/** The deprecated predecessor submission routes (POST /api/jobs, /api/v2/jobs, /api/v3/jobs). */
export type PredecessorId = Extract<CatalogueEntry, { deprecated: true }>["id"];

/** The retained predecessor routes: refused, naming the captured Cargo workspace submission. */
export const refusePredecessorSubmission = async ({ op }: BaseContext): Promise<ResponseDocumentOf<PredecessorId>> =>
  refuse(
    "legacy_unsupported",
    `${op.method} ${op.path} is a retired predecessor form; submit a captured Cargo workspace with POST /api/v4/jobs (jobs.submit)`,
  );
