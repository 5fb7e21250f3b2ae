/**
 * What a new user reads first (issue 36): the README's environment table is one table (a blank
 * line had split it, rendering 30 rows as literal pipes), every variable config.ts reads is in
 * it, and "Running a job" leads with the CLI: `kiln login` → `kiln repos add` → `kiln cargo test`.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url));
const readme = readFileSync(join(repositoryRoot, "README.md"), "utf8");

describe("README", () => {
  it("has one environment table holding every KILN_ variable config.ts reads", () => {
    const lines = readme.split("\n");
    const header = lines.findIndex((line) => /^\| variable\s+\| default\s+\| meaning/.test(line));
    assert.ok(header >= 0, "the environment table's header");
    let end = header;
    while (lines[end + 1]?.startsWith("|")) end += 1;
    const table = lines.slice(header, end + 1).join("\n");
    // Whatever follows the table is no longer a row of it.
    assert.doesNotMatch(lines.slice(end + 1, end + 3).join("\n"), /^\s*\|\s*`KILN_/m, "a row after a blank line");
    const config = readFileSync(join(repositoryRoot, "packages/server/src/config.ts"), "utf8");
    const read = new Set([...config.matchAll(/"(KILN_[A-Z0-9_]+)"/g)].map((m) => m[1] ?? ""));
    for (const name of read) assert.match(table, new RegExp(`\`${name}\``), `${name} in the table`);
  });

  it("leads 'Running a job' with kiln login, kiln repos add and kiln cargo test", () => {
    const section = readme.slice(readme.indexOf("## Running a job"));
    const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
    const commands = block
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => line.replace(/#.*$/, "").trim());
    assert.equal(commands.length, 5, block);
    assert.match(commands[0] ?? "", /^kiln login --server /);
    assert.match(commands[1] ?? "", /^kiln repos add [\w.-]+\/[\w.-]+$/);
    assert.match(commands[2] ?? "", /kiln cargo test$/);
  });
});
