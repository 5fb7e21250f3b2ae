import { namesOfPeople } from "@kiln/storage";
import { escapeHtml } from "./html.js";
import type { PageContext } from "./perform-as-person.js";

/** Renders who acted (a record's principal) as a page shows it. */
export type PersonLabel = (principal: string | null) => string;

/**
 * Who the given principals are, as the tenant's pages show them: a member by name, with their
 * email address in the tooltip; an agent credential by its name; anyone else (a person no
 * longer a member, `system`) as recorded.
 */
export async function personLabels(ctx: PageContext, principals: readonly (string | null)[]): Promise<PersonLabel> {
  const names = await namesOfPeople(ctx.deps.storage, {
    tenantId: ctx.person.tenantId,
    ids: principals.filter((p): p is string => p !== null),
  });
  return (principal) => {
    if (principal === null) return "—";
    const person = names.get(principal);
    if (person !== undefined) {
      return `<span class="person" title="${escapeHtml(person.email)}">${escapeHtml(person.displayName)}</span> <span class="muted">${escapeHtml(person.email)}</span>`;
    }
    const agent = /^agent:(.+)$/.exec(principal);
    if (agent !== null) return `agent credential <code>${escapeHtml(agent[1] ?? "")}</code>`;
    return `<span class="mono">${escapeHtml(principal)}</span>`;
  };
}
