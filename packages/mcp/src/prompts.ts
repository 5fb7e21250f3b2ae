import { PLATFORM_DEFAULT_SIZE, SIZES } from "@kiln/contract";
import { ErrorCode, type GetPromptResult, McpError } from "@modelcontextprotocol/sdk/types.js";

interface PromptArgument {
  readonly name: string;
  readonly description: string;
  readonly required: boolean;
}

interface KilnPrompt {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly arguments: readonly PromptArgument[];
  readonly text: (args: Record<string, string>) => string;
}

const TERMINAL = "passed, failed or cancelled";

function submitAndWait(args: Record<string, string>): string {
  const repository = args.repository ?? "";
  const command = (args.cargo_command ?? "test").trim() || "test";
  const [operation = "test", ...rest] = command.split(/\s+/);
  return `Run \`cargo ${command}\` for ${repository} on kiln and report the outcome, using kiln's tools only.

1. Capture the workspace: every regular file of the Cargo workspace (tracked and untracked; never target/ or .git/), sorted by path in byte order. Each file is {path (repository-relative, no leading ./), bytes (the file's bytes as integers 0–255), executable (boolean)}.
2. Call jobs_submit with:
   - schema_version: 1, repository: "${repository}", size: the tenant's default_size unless the user named one (tenant_settings_get: the value of the setting named default_size; "${PLATFORM_DEFAULT_SIZE}" while the tenant set none; the sizes: ${SIZES.join(", ")})
   - workspace: {base_commit: the current commit id, branch: the current branch, invocation: {operation: "${operation}", arguments: ${JSON.stringify(rest)}}, source: {files: [...]}}
   - idempotency_key: a fresh unique key. If the call fails in transit, repeat it with the SAME key: kiln never creates a second job for one key.
   The result is the job id. A refusal result carries {code, status, detail}: not_found means the repository is not onboarded (use the onboard-a-repository prompt); invalid_request's detail names the offending member.
3. Call jobs_get {id} every 3–5 seconds until status is ${TERMINAL} (it moves queued → running → terminal). Do not resubmit while it runs.
4. Call jobs_evidence {id} once it is terminal. Read job.status and job.failure {phase, cause, detail}; report.failures (what failed, first: each compiler error's code, message and location {file, line, column} in the repository, each failed test's panic message and location, and log_sequence, its line in jobs_logs); report.phases; report.tests (each test's target, name and outcome; \`flaky: true\` marks a test that failed, then passed on a re-run, its \`tries\` holding each try's outcome, duration and output); report.retries (re-runs, flaky and failed_every_try counts, flaky_policy); report.admitted (toolchain, network policy); usage.
5. Report to the user: the final status; passed/failed/ignored test counts; flaky tests apart from the failures (each by name and the try that passed: a flaky test is not a failure, but it is not a clean pass either); for a failure the failing phase, cause, and each entry of report.failures of the last attempt with its file:line. If it failed, follow the diagnose-a-failure steps with this job id before answering. Asked which tests are flaky in the repository over time, call repositories_tests {owner, name, sort: "flakiest"}.`;
}

function diagnoseAFailure(args: Record<string, string>): string {
  const id = args.job_id ?? "";
  return `Diagnose why kiln job ${id} failed and say what to do next, using kiln's tools only.

1. Call jobs_get {id: "${id}"}. If status is not failed, say so and stop (queued/running: wait for it; passed: nothing to diagnose). Note failure.phase, failure.cause and failure.detail, and transitions.
2. Call jobs_evidence {id: "${id}"}. Read report.failures (what failed, first), report.phases (which phase failed), report.tests (every test whose outcome is failed, with its target), report.crates (a crate whose outcome is failed), report.admitted (toolchain and network policy) and attempts.
3. By failure.cause:
   - test_failure: report.failures lists each failed test's panic (kind test_panic: test, message, location file:line:column). For the test's output before the panic, call jobs_logs {id: "${id}", limit: 1000} and follow next_cursor to the record whose sequence is the failure's log_sequence.
   - build_error: report.failures lists the first compiler errors (kind compiler_error: code, message, location in the repository, rendered: rustc's rendering). Without them, find the \`error[E…]\` lines with jobs_logs_search {id: "${id}", q: "error["} and their \`--> file:line:col\` in jobs_logs.
   - toolchain_not_admitted: the requested toolchain is not installed on kiln's hosts; report.admitted and failure.detail name it. Next step: pin an installed toolchain.
   - wall_clock_ceiling: the job ran past its ceiling; repositories_settings_get {owner, name} shows wall_clock_ceiling_seconds. Next step: speed up or split the work, or raise the ceiling (repositories_settings_write).
   - infrastructure: kiln failed, not the code. Next step: jobs_retry {id: "${id}", idempotency_key: a fresh key}.
   - cancelled: transitions name who cancelled it.
   A test in report.tests with \`flaky: true\` passed on a re-run: it is not the failure (under flaky_policy fail it still fails the job; report.retries says which policy held). To tell a flaky test from a newly broken one, call repositories_tests {owner, name, sort: "flakiest"} and {…, sort: "newly_failing"}: each test's recent outcomes with job ids and its flaky rate.
4. Answer with: the failing phase, the failing tests or provisioning cause, the exact error lines (quoted from the log) and one concrete next step.`;
}

function onboardARepository(args: Record<string, string>): string {
  const repository = args.repository ?? "";
  const [owner = "", name = ""] = repository.split("/");
  return `Onboard ${repository} to kiln and run its first job, using kiln's tools only.

1. Call onboarding_surface. If installation_active is not true, kiln's source-hosting app is not installed and claimed for this tenant: give the user install_url (install the app on ${repository}) and claim_url (claim the installation), then stop until they confirm. An admin credential may instead claim a known installation with onboarding_claim {installation_id, idempotency_key}.
2. Confirm the repository is onboarded: call repositories_get {owner: "${owner}", name: "${name}"} (or look for it in repositories_list). A not_found refusal means the app's installation does not cover ${repository}: ask the user to add it to the installation, then check again.
3. Call repositories_settings_get {owner: "${owner}", name: "${name}"} and note the effective settings (wall_clock_ceiling_seconds, injected build settings).
4. Run the first job: follow the submit-and-wait prompt for ${repository} with \`cargo check\` (or \`cargo test\`), i.e. jobs_submit, then jobs_get until ${TERMINAL}, then jobs_evidence.
5. Call onboarding_surface again: first_job should name the job. Report the installation state, the repository's settings and the first job's outcome.`;
}

export const KILN_PROMPTS: readonly KilnPrompt[] = [
  {
    name: "submit-and-wait",
    title: "Submit a Cargo job and wait",
    description: "Submit a captured Cargo workspace, follow the job to a terminal state and report its evidence.",
    arguments: [
      { name: "repository", description: "The onboarded repository, owner/name.", required: true },
      {
        name: "cargo_command",
        description: "Cargo command and arguments, e.g. `test --workspace` (default test).",
        required: false,
      },
    ],
    text: submitAndWait,
  },
  {
    name: "diagnose-a-failure",
    title: "Diagnose a failed job",
    description: "Read a failed job's evidence and logs; name the failing phase, test or cause and the next step.",
    arguments: [{ name: "job_id", description: "The failed job's id.", required: true }],
    text: diagnoseAFailure,
  },
  {
    name: "onboard-a-repository",
    title: "Onboard a repository",
    description: "Check the installation claim, confirm the repository is onboarded and run its first job.",
    arguments: [{ name: "repository", description: "The repository, owner/name.", required: true }],
    text: onboardARepository,
  },
];

export function listPrompts() {
  return KILN_PROMPTS.map(({ text: _text, arguments: args, ...prompt }) => ({
    ...prompt,
    arguments: args.map((a) => ({ ...a })),
  }));
}

export function getPrompt(name: string, args: Record<string, string> = {}): GetPromptResult {
  const prompt = KILN_PROMPTS.find((p) => p.name === name);
  if (prompt === undefined) throw new McpError(ErrorCode.InvalidParams, `no prompt ${name}`);
  for (const argument of prompt.arguments) {
    if (argument.required && (args[argument.name] ?? "").trim() === "") {
      throw new McpError(ErrorCode.InvalidParams, `prompt ${name} needs the argument ${argument.name}`);
    }
  }
  return {
    description: prompt.description,
    messages: [{ role: "user", content: { type: "text", text: prompt.text(args) } }],
  };
}
