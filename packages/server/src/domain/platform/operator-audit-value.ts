/**
 * The operator audit keeps the operation and its outcome inside the entry's value as
 * JSON, so the shared append-only table serves both audits unchanged.
 */
export function operatorAuditValue(operation: string, outcome: string, value?: string): string {
  return JSON.stringify({ operation, outcome, ...(value === undefined ? {} : { value }) });
}
