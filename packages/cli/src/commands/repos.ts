import { randomUUID } from "node:crypto";
import { REPOSITORY_PATTERN } from "@kiln/contract";
import type { Command } from "commander";
import { CliExit, connect, EXIT, out, printJson, runCommand, table } from "../output.js";

interface JsonOption {
  json?: boolean;
}

const REPOSITORY = new RegExp(REPOSITORY_PATTERN);

/**
 * `kiln repos add owner/name`: a tenant admin onboards a repository (repositories.onboard, a kiln
 * extension), so its jobs are admitted. Onboarding it again changes nothing and says so.
 */
async function add(repository: string, options: JsonOption): Promise<void> {
  // Said here in the user's words; the service would refuse it too, naming its pattern.
  if (!REPOSITORY.test(repository)) {
    throw new CliExit(
      EXIT.error,
      `a repository is owner/name as on the source host (letters, digits, '.', '_' and '-'), e.g. acme/widget; got ${JSON.stringify(repository)}`,
    );
  }
  const { client } = connect();
  const onboarded = await client.call("repositories.onboard", {
    body: { repository },
    idempotencyKey: `repos-add-${randomUUID()}`,
  });
  if (options.json) {
    printJson(onboarded);
    return;
  }
  out(
    onboarded.created
      ? `${onboarded.repository} onboarded: its jobs are admitted (\`kiln cargo test\` in its workspace).`
      : `${onboarded.repository} was already onboarded (${onboarded.onboarded_at} by ${onboarded.onboarded_by}); nothing changed.`,
  );
  out("Check runs on its commits need the GitHub App installed on it.");
}

/** `kiln repos list`: the tenant's onboarded repositories and the bytes their caches hold. */
async function list(options: JsonOption & { cursor?: string }): Promise<void> {
  const { client } = connect();
  const page = await client.call("repositories.list", {
    query: options.cursor === undefined ? {} : { cursor: options.cursor },
  });
  if (options.json) {
    printJson(page);
    return;
  }
  out(
    page.repositories.length === 0
      ? "no repositories onboarded yet: a tenant admin adds one with `kiln repos add owner/name`"
      : table(
          ["REPOSITORY", "CACHE BYTES"],
          page.repositories.map((r) => [r.repository, String(r.total_bytes)]),
        ),
  );
  if (page.next_cursor !== null) out(`more: kiln repos list --cursor ${page.next_cursor}`);
}

export function registerReposCommands(program: Command): void {
  const repos = program.command("repos").description("the tenant's onboarded repositories");
  repos
    .command("add")
    .description("onboard a repository so its jobs are admitted (tenant admins and owners)")
    .argument("<owner/name>")
    .option("--json", "print the RepositoryOnboarded document")
    .action((repository: string, options: JsonOption) =>
      runCommand(options.json === true, () => add(repository, options)),
    );
  repos
    .command("list")
    .description("the onboarded repositories (a table; --json: the RepositoriesPage)")
    .option("--cursor <cursor>", "continue from a previous page")
    .option("--json", "print the RepositoriesPage")
    .action((options: JsonOption & { cursor?: string }) => runCommand(options.json === true, () => list(options)));
}
