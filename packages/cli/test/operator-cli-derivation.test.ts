import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CATALOGUE, defineOperatorOperation, type Operation } from "@kiln/contract";
import type { Command } from "commander";
import { buildOperatorInput } from "../src/operator/build-input.js";
import { deriveOperatorCommands, operatorOperations } from "../src/operator/derive-commands.js";
import { renderDocument } from "../src/operator/render-document.js";
import { buildProgram } from "../src/program.js";
import { runCli } from "./harness.js";

const derived = deriveOperatorCommands();
const commandOf = (id: string) => {
  const command = derived.find((c) => c.operation.id === id);
  assert.ok(command, `${id} has a derived command`);
  return command;
};

/** The words of every leaf command below `command` (a leaf: a command with no subcommands). */
function leavesOf(command: Command, words: string[] = []): string[] {
  if (command.commands.length === 0) return [words.join(" ")];
  return command.commands.flatMap((sub) => leavesOf(sub, [...words, sub.name()]));
}

describe("kiln operator: commands derived from the catalogue", () => {
  it("every operator operation has exactly one command, and `kiln operator` has no other", () => {
    const operations = operatorOperations();
    assert.ok(operations.length > 0);
    assert.ok(operations.every((op) => op.security.kind === "operator"));
    assert.equal(
      operations.length,
      CATALOGUE.filter((op) => op.id.startsWith("operator.") && op.id !== "operator.session.create").length,
      "the operator surface is the operator-security entries (session.create is what opens a session)",
    );
    assert.deepEqual(
      derived.map((c) => c.operation.id),
      operations.map((op) => op.id),
    );
    const operator = buildProgram().commands.find((c) => c.name() === "operator");
    assert.ok(operator);
    assert.deepEqual(
      leavesOf(operator).sort(),
      derived.map((c) => c.words.join(" ")).sort(),
      "the registered leaves are exactly the derived commands",
    );
  });

  it("names a command by its id and takes path parameters positionally, in path order", () => {
    assert.deepEqual(commandOf("operator.hosts.drain").words, ["hosts", "drain"]);
    assert.deepEqual(commandOf("operator.hosts.kernel_log").words, ["hosts", "kernel-log"]);
    assert.deepEqual(commandOf("operator.hosts.recovery.policy.set").words, ["hosts", "recovery", "policy", "set"]);
    assert.deepEqual(
      commandOf("operator.placements.reconcile").positionals.map((p) => p.member),
      ["job_id", "vm_id"],
    );
    assert.deepEqual(
      commandOf("operator.hosts.incidents.close").positionals.map((p) => p.member),
      ["id", "incident"],
    );
    assert.deepEqual(
      commandOf("operator.placements.receipt").queryOptions.map((o) => [o.word, o.kind.kind, o.required]),
      [["page", "integer", false]],
    );
    assert.deepEqual(
      commandOf("operator.hosts.undrain").memberOptions.map((o) => [o.word, o.kind.kind, o.required]),
      [
        ["policy-revision", "integer", true],
        ["note", "string", false],
      ],
    );
    // A nested object member (TenantControlUpdate.changes) has no one-word form: it travels in --body.
    assert.deepEqual(
      commandOf("operator.tenants.controls.set").memberOptions.map((o) => o.word),
      ["expected-version", "note"],
    );
  });

  it("fails loudly when a catalogue change would make two commands collide or a command a group", () => {
    const op = (id: string, path: string): Operation =>
      defineOperatorOperation({
        id,
        method: "GET",
        path,
        summary: id,
        tag: "t",
        request: {},
        response: { encoding: "none", description: "nothing" },
      });
    assert.throws(
      () => deriveOperatorCommands([op("operator.hosts", "/a"), op("operator.hosts.list", "/b")]),
      /operator\.hosts \(`hosts`\) is a group of operator\.hosts\.list/,
    );
    assert.throws(
      () => deriveOperatorCommands([op("operator.a.kernel_log", "/a"), op("operator.a.kernel-log", "/b")]),
      /both derive `a kernel-log`/,
    );
  });

  it("types values by the schema, checks the request before sending, and records the command-line surface", () => {
    const undrain = commandOf("operator.hosts.undrain");
    assert.deepEqual(
      buildOperatorInput(undrain, {
        positionals: ["builder-1"],
        options: new Map([["policy-revision", "3"]]),
        body: '{"note":"after maintenance"}',
      }),
      { params: { id: "builder-1" }, body: { note: "after maintenance", policy_revision: 3 } },
    );
    assert.throws(
      () => buildOperatorInput(undrain, { positionals: ["builder-1"], options: new Map([["policy-revision", "one"]]) }),
      /--policy-revision: expected an integer, got "one"/,
    );
    assert.throws(
      () => buildOperatorInput(undrain, { positionals: ["builder-1"], options: new Map() }),
      /does not match operator\.hosts\.undrain:\n {2}body\/policy_revision: Expected required property/,
    );
    assert.throws(
      () =>
        buildOperatorInput(undrain, { positionals: ["no such host!"], options: new Map([["policy-revision", "1"]]) }),
      /<id>: Expected string to match/,
    );
    const receipt = commandOf("operator.placements.receipt");
    assert.throws(
      () => buildOperatorInput(receipt, { positionals: ["j1", "v1"], options: new Map([["page", "0"]]) }),
      /--page: Expected integer to be greater or equal to 1/,
    );

    const invoke = commandOf("operator.hosts.recovery.invoke");
    const confirmation = new Map([["confirmation", "recover-boot:svc-1:preserve-root-and-srv"]]);
    assert.deepEqual(buildOperatorInput(invoke, { positionals: ["h1"], options: confirmation }).body, {
      surface: "command_line",
      confirmation: "recover-boot:svc-1:preserve-root-and-srv",
    });
    assert.equal(
      (
        buildOperatorInput(invoke, {
          positionals: ["h1"],
          options: new Map([...confirmation, ["surface", "operator_api"]]),
        }).body as { surface: string }
      ).surface,
      "operator_api",
      "an explicit surface wins",
    );
  });

  it("renders a list of records as a table and a record as member lines", () => {
    assert.equal(
      renderDocument([
        { host: "b1", state: "serving", last: null, extra: { a: 1 } },
        { host: "local", state: "drained", last: "x", extra: { a: 2 } },
      ]),
      "HOST   STATE    LAST\nb1     serving  -\nlocal  drained  x\n(2 rows; also extra: see --json)",
    );
    assert.equal(
      renderDocument({ tenant: "acme", limits: { jobs: 3, card: null }, tags: ["a", "b"], none: [] }),
      "tenant: acme\nlimits:\n  jobs: 3\n  card: -\ntags: a, b\nnone: (none)",
    );
  });

  it("`kiln operator --help` lists every derived command", async () => {
    const help = await runCli(["operator", "--help"]);
    assert.equal(help.code, 0, help.stderr);
    for (const command of derived) {
      const usage = [...command.words, ...command.positionals.map((p) => `<${p.member}>`)].join(" ");
      assert.match(help.stdout, new RegExp(`^ {2}${usage.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s+\\S`, "m"), usage);
    }
    assert.match(help.stdout, /KILN_OPERATOR_CREDENTIAL/);
  });
});
