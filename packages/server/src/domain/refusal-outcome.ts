import { Refusal, type RefusalDocument } from "./refusal.js";

/** A pure step's result or the refusal it threw, carried across threads and thrown where the handler would have. */
export type Outcome<T> = { readonly value: T } | { readonly refusal: RefusalDocument };

export function outcomeOf<T>(step: () => T): Outcome<T> {
  try {
    return { value: step() };
  } catch (error) {
    if (error instanceof Refusal) return { refusal: error.toDocument() };
    throw error;
  }
}

export function valueOrRefusal<T>(outcome: Outcome<T>): T {
  if ("value" in outcome) return outcome.value;
  const { code, status: _status, detail, ...extras } = outcome.refusal;
  throw new Refusal(code, detail, extras);
}
