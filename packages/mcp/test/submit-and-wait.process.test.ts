import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { inlineSubmission } from "@kiln/server/testing";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CLI_NODE, KILN_BIN, type KilnUnderTest, kilnEnv, resultJson, startKiln } from "./harness.js";

interface SourceFile {
  path: string;
  bytes: number[];
  executable: boolean;
}

/** A tiny generated crate: files sorted by byte order, bytes as integer arrays. */
function tinyCrate(name: string, failing: boolean): SourceFile[] {
  const file = (path: string, text: string): SourceFile => ({ path, bytes: [...Buffer.from(text)], executable: false });
  const failingTest = failing
    ? '    #[test]\n    fn doubles_wrongly() {\n        assert_eq!(super::double(2), 5, "two doubled is not five");\n    }\n'
    : "";
  return [
    file("Cargo.toml", `[package]\nname = "${name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n`),
    file(
      "src/lib.rs",
      `pub fn double(x: u32) -> u32 {\n    x * 2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() {\n        assert_eq!(super::double(21), 42);\n    }\n${failingTest}}\n`,
    ),
  ].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
}

interface Job {
  id: string;
  status: string;
  failure?: { phase: string; cause: string; detail: string } | null;
  transitions: { to: string }[];
}
interface Evidence {
  job: Job;
  report: { tests: { target: string; name: string; outcome: string }[]; phases: { name: string }[] };
}

describe("submit-and-wait: a real job end to end through MCP tools alone", () => {
  let kiln: KilnUnderTest;
  let client: Client;

  before(async () => {
    kiln = await startKiln({ localHost: true });
    await kiln.onboard("acme/widget");
    const token = await kiln.mintAgent(["read", "submit"], "builder");
    client = new Client({ name: "kiln-agent-test", version: "0" });
    const env = Object.fromEntries(
      Object.entries(kilnEnv(kiln, token)).filter((e): e is [string, string] => e[1] !== undefined),
    );
    await client.connect(new StdioClientTransport({ command: CLI_NODE, args: [KILN_BIN, "mcp"], env, stderr: "pipe" }));
  });
  after(async () => {
    await client.close();
    await kiln.close();
  });

  const call = async (name: string, args: Record<string, unknown>) => {
    const result = await client.callTool({ name, arguments: args });
    assert.notEqual(result.isError, true, `${name}: ${JSON.stringify(result.content)}`);
    return resultJson(result);
  };

  const submit = (files: SourceFile[], key: string) =>
    call("jobs_submit", { ...inlineSubmission("acme/widget", "test", files), idempotency_key: key }) as Promise<string>;

  /** Polls jobs_get until the job is terminal, as the prompt tells an agent to. */
  async function waitFor(id: string): Promise<Job> {
    const deadline = Date.now() + 240_000;
    for (;;) {
      const job = (await call("jobs_get", { id })) as Job;
      if (TERMINAL_JOB_STATUSES.has(job.status)) return job;
      assert.ok(Date.now() < deadline, `job ${id} still ${job.status}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  it("follows the prompt: jobs_submit, jobs_get until terminal, jobs_evidence", async () => {
    const prompt = await client.getPrompt({ name: "submit-and-wait", arguments: { repository: "acme/widget" } });
    const steps = (prompt.messages[0]?.content as { text?: string } | undefined)?.text ?? "";
    const order = ["jobs_submit", "jobs_get", "jobs_evidence"].map((tool) => steps.indexOf(tool));
    assert.deepEqual(
      [...order].sort((a, b) => a - b),
      order,
      "the prompt names the tools in order",
    );

    const id = await submit(tinyCrate("doubler", false), "submit-doubler");
    assert.equal(typeof id, "string");
    // A retry with the same key is the same submission, never a second job.
    assert.equal(await submit(tinyCrate("doubler", false), "submit-doubler"), id);

    const job = await waitFor(id);
    assert.equal(job.status, "passed", JSON.stringify(job));
    assert.deepEqual(
      job.transitions.map((t) => t.to),
      ["queued", "running", "passed"],
    );
    const evidence = (await call("jobs_evidence", { id })) as Evidence;
    assert.equal(evidence.job.id, id);
    assert.deepEqual(
      evidence.report.tests.map((t) => `${t.name} ${t.outcome}`),
      ["tests::doubles passed"],
    );

    const listed = (await call("jobs_list", { repository: "acme/widget" })) as { jobs: { id: string }[] };
    assert.ok(listed.jobs.some((j) => j.id === id));
  });

  it("diagnoses a failure: failure.cause, report.tests and the failing test's output from jobs_logs", async () => {
    const id = await submit(tinyCrate("wrongdoubler", true), "submit-wrongdoubler");
    const job = await waitFor(id);
    assert.equal(job.status, "failed");
    assert.equal(job.failure?.cause, "test_failure");
    const evidence = (await call("jobs_evidence", { id })) as Evidence;
    assert.deepEqual(
      evidence.report.tests
        .filter((t) => t.outcome === "failed")
        .map((t) => t.name)
        .sort(),
      ["tests::doubles_wrongly"],
    );
    const lines: string[] = [];
    let cursor: string | null = null;
    do {
      const page = (await call("jobs_logs", { id, limit: 1000, ...(cursor === null ? {} : { cursor }) })) as {
        records: { text: string }[];
        next_cursor: string | null;
      };
      lines.push(...page.records.map((r) => r.text));
      cursor = page.next_cursor;
    } while (cursor !== null);
    assert.ok(
      lines.some((l) => l.includes("---- tests::doubles_wrongly stdout ----")),
      lines.join("\n"),
    );
    assert.ok(lines.some((l) => l.includes("two doubled is not five")));

    // The same log as a resource, and the job as resources.
    const log = await client.readResource({ uri: `kiln://jobs/${id}/logs` });
    const text = (log.contents[0] as { text: string }).text;
    assert.equal(text, lines.join("\n"));
    const resource = await client.readResource({ uri: `kiln://jobs/${encodeURIComponent(id)}` });
    assert.equal((JSON.parse((resource.contents[0] as { text: string }).text) as Job).status, "failed");
    const evidenceResource = await client.readResource({ uri: `kiln://jobs/${id}/evidence` });
    assert.equal((JSON.parse((evidenceResource.contents[0] as { text: string }).text) as Evidence).job.id, id);
  });
});
