import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseCargoArguments } from "../src/commands/cargo.js";
import { mcpEnvironment } from "../src/commands/mcp-environment.js";
import {
  ConfigError,
  credentialsPath,
  DEFAULT_ENDPOINT,
  requireToken,
  resolveEnvironment,
  writeStoredCredentials,
} from "../src/config.js";

function home(config?: object, login?: { endpoint: string; token: string }): string {
  const xdg = mkdtempSync(join(tmpdir(), "kiln-cli-cfg-"));
  const dir = join(xdg, "kiln");
  mkdirSync(dir);
  if (config !== undefined) writeFileSync(join(dir, "config.json"), JSON.stringify(config));
  if (login !== undefined) {
    writeStoredCredentials(dir, { ...login, token_id: null, principal: null, tenant: null, saved_at: "" });
  }
  return xdg;
}

describe("configuration precedence", () => {
  it("credential: KILN_TOKEN > KILN_CREDENTIAL_FILE > stored login (for its own endpoint only)", () => {
    const xdg = home(undefined, { endpoint: DEFAULT_ENDPOINT, token: "stored" });
    assert.equal(statSync(credentialsPath(join(xdg, "kiln"))).mode & 0o777, 0o600);
    const file = join(xdg, "token.txt");
    writeFileSync(file, "  from-file\n");
    const base = { XDG_CONFIG_HOME: xdg };
    assert.deepEqual([resolveEnvironment(base).token, resolveEnvironment(base).tokenSource], ["stored", "login"]);
    const viaFile = resolveEnvironment({ ...base, KILN_CREDENTIAL_FILE: file });
    assert.deepEqual([viaFile.token, viaFile.tokenSource], ["from-file", "KILN_CREDENTIAL_FILE"]);
    const direct = resolveEnvironment({ ...base, KILN_CREDENTIAL_FILE: file, KILN_TOKEN: "direct" });
    assert.deepEqual([direct.token, direct.tokenSource], ["direct", "KILN_TOKEN"]);
    // A login stored for another endpoint is never sent elsewhere.
    const elsewhere = resolveEnvironment({ ...base, KILN_ENDPOINT: "http://kiln.example:9000" });
    assert.equal(elsewhere.token, undefined);
    assert.throws(() => requireToken(elsewhere), /stored login is for http:\/\/127\.0\.0\.1:7860/);
    assert.throws(() => resolveEnvironment({ ...base, KILN_CREDENTIAL_FILE: join(xdg, "missing") }), ConfigError);
  });

  it("endpoint: KILN_ENDPOINT > config.json > the default; kiln mcp resolves the same way", () => {
    const xdg = home(
      { endpoint: "http://config.example:7000" },
      { endpoint: "http://config.example:7000", token: "t" },
    );
    assert.equal(resolveEnvironment({ XDG_CONFIG_HOME: xdg }).endpoint, "http://config.example:7000");
    assert.equal(resolveEnvironment({ XDG_CONFIG_HOME: xdg }).endpointSource, "config");
    assert.equal(
      resolveEnvironment({ XDG_CONFIG_HOME: xdg, KILN_ENDPOINT: "http://env.example" }).endpoint,
      "http://env.example",
    );
    assert.equal(resolveEnvironment({ XDG_CONFIG_HOME: home() }).endpoint, DEFAULT_ENDPOINT);
    assert.throws(() => resolveEnvironment({ XDG_CONFIG_HOME: xdg, KILN_ENDPOINT: "not a url" }), /not a URL/);
    assert.deepEqual(mcpEnvironment({ XDG_CONFIG_HOME: xdg }), {
      endpoint: "http://config.example:7000",
      token: "t",
      tokenSource: "login",
    });
    assert.throws(() => mcpEnvironment({ XDG_CONFIG_HOME: home() }), /no credential/);
  });
});

describe("kiln cargo arguments", () => {
  it("kiln's options anywhere before `--`, everything else to cargo in order", () => {
    const parsed = parseCargoArguments([
      "+nightly",
      "test",
      "--workspace",
      "--size=kiln8-cpu",
      "-p",
      "foo",
      "--artifact",
      "debug/foo",
      "--json",
      "--repository",
      "acme/widget",
      "--",
      "--nocapture",
      "--json",
    ]);
    assert.equal(parsed.operation, "test");
    assert.equal(parsed.toolchain, "nightly");
    assert.equal(parsed.size, "kiln8-cpu");
    assert.equal(parsed.repository, "acme/widget");
    assert.deepEqual(parsed.artifacts, ["debug/foo"]);
    assert.equal(parsed.json, true);
    assert.deepEqual(parsed.cargoArguments, ["--workspace", "-p", "foo", "--", "--nocapture", "--json"]);
  });

  it("refuses what cargo cannot run remotely or kiln cannot size", () => {
    assert.throws(() => parseCargoArguments(["run"]), /not run/);
    assert.throws(() => parseCargoArguments(["--release"]), /name a cargo operation/);
    assert.throws(() => parseCargoArguments(["build", "--size", "huge"]), /--size must be one of/);
    assert.throws(() => parseCargoArguments(["build", "--repository"]), /needs a value/);
  });
});
