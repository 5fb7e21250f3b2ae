/**
 * The value of a JSON column this service wrote from a value of type T (jobs' failure, usage,
 * settlement and admission; attempts' reports). Reading it back is the other side of that write,
 * not input: it is typed, not validated again. Where a column crosses a process boundary the
 * reader checks it against its schema instead (domain/hosts/assemble-placement.ts).
 */
export function storedJson<T>(text: string | null): T | null {
  return text === null ? null : (JSON.parse(text) as T);
}
