import type { Selectable } from "kysely";
import type { AgentCredentialsTable } from "../schema.js";

/** An agent credential as stored (the value itself never is). */
export type AgentCredentialRow = Selectable<AgentCredentialsTable>;
