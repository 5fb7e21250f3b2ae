/**
 * ARCHITECTURE.md's package table is true: its `may import` column lists every `@kiln` package
 * and library each package's src/ imports, and biome.json's per-package noRestrictedImports
 * refuses exactly the `@kiln` packages the column leaves out. Inside packages/server, arrows run
 * from the web edge (src/web/) to the domain (src/domain/) only (ARCHITECTURE.md, Wings).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
const PACKAGES = ["contract", "storage", "server", "client", "host", "mcp", "cli"];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith(".ts") ? [path] : [];
  });
}

/** Bare module specifiers a package's src imports (a scoped name or a top-level name), Node's own left out. */
function importedModules(pkg: string): Set<string> {
  const found = new Set<string>();
  for (const file of sourceFiles(join(ROOT, "packages", pkg, "src"))) {
    for (const match of readFileSync(file, "utf8").matchAll(/(?:from|import)\s+"([^".][^"]*)"/g)) {
      const specifier = match[1] ?? "";
      if (specifier.startsWith("node:")) continue;
      const parts = specifier.split("/");
      found.add(specifier.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] ?? specifier));
    }
  }
  return found;
}

/** The `may import` column of ARCHITECTURE.md's package table, per package. */
function documentedImports(): Map<string, Set<string>> {
  const text = readFileSync(join(ROOT, "ARCHITECTURE.md"), "utf8");
  const table = new Map<string, Set<string>>();
  for (const line of text.split("\n")) {
    const row = /^\|\s*`packages\/([a-z]+)`\s*\|.*\|([^|]*)\|\s*$/.exec(line);
    if (row === null) continue;
    const names = [...(row[2] ?? "").matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? "");
    table.set(row[1] ?? "", new Set(names));
  }
  return table;
}

/** The `@kiln` packages biome.json lets each package's src import (the `!@kiln/…` exceptions). */
function lintedKilnImports(): Map<string, Set<string>> {
  const config = JSON.parse(readFileSync(join(ROOT, "biome.json"), "utf8")) as {
    overrides: { includes: string[]; linter?: { rules?: { style?: { noRestrictedImports?: unknown } } } }[];
  };
  const allowed = new Map<string, Set<string>>();
  for (const override of config.overrides) {
    const rule = override.linter?.rules?.style?.noRestrictedImports as
      | { options: { patterns: { group: string[] }[] } }
      | undefined;
    const pkg = /^packages\/([a-z]+)\/src\/\*\*$/.exec(override.includes[0] ?? "")?.[1];
    if (rule === undefined || pkg === undefined) continue;
    const kiln = rule.options.patterns.find((p) => p.group.includes("@kiln/*"));
    assert.ok(kiln !== undefined, `biome.json restricts @kiln/* for packages/${pkg}`);
    allowed.set(pkg, new Set(kiln.group.filter((g) => g.startsWith("!")).map((g) => g.slice(1))));
  }
  return allowed;
}

describe("ARCHITECTURE.md's package table", () => {
  const documented = documentedImports();
  const linted = lintedKilnImports();

  it("has one row per package", () => {
    assert.deepEqual([...documented.keys()].sort(), [...PACKAGES].sort());
  });

  for (const pkg of PACKAGES) {
    it(`packages/${pkg}: every module its src imports is in its may-import column, and the lint rule allows exactly its @kiln ones`, () => {
      const column = documented.get(pkg) ?? new Set<string>();
      const missing = [...importedModules(pkg)].filter((m) => !column.has(m));
      assert.deepEqual(missing, [], `packages/${pkg} imports modules its row does not list`);
      const kilnInColumn = [...column].filter((m) => m.startsWith("@kiln/")).sort();
      assert.deepEqual([...(linted.get(pkg) ?? [])].sort(), kilnInColumn);
    });
  }
});

describe("testing modules stay out of production", () => {
  it("no src module outside a package's src/testing/ imports a testing module (its own or @kiln/*/testing)", () => {
    const offences = PACKAGES.flatMap((pkg) => {
      const src = join(ROOT, "packages", pkg, "src");
      return sourceFiles(src)
        .filter((file) => !relative(src, file).startsWith("testing/"))
        .flatMap((file) =>
          specifiersOf(file)
            .filter((specifier) =>
              specifier.startsWith(".")
                ? relative(src, resolve(dirname(file), specifier)).startsWith("testing/")
                : /^@kiln\/[a-z]+\/testing$/.test(specifier),
            )
            .map((specifier) => `packages/${pkg}/src/${relative(src, file)} imports ${specifier}`),
        );
    });
    assert.deepEqual(offences, []);
  });
});

describe("queries live in storage's verb modules", () => {
  it("no server module builds SQL itself (selectFrom, insertInto, updateTable, deleteFrom, sql``)", () => {
    const offenders = sourceFiles(join(ROOT, "packages", "server", "src")).filter((file) =>
      /\.(selectFrom|insertInto|updateTable|deleteFrom)\(|\bsql`/.test(readFileSync(file, "utf8")),
    );
    assert.deepEqual(offenders, []);
  });
});

describe("storage never reads the time", () => {
  it("no storage verb reads the wall clock (new Date(), Date.now(), systemClock): time comes in as `now`", () => {
    // The busy-retry backoff of SQLite measures its own wait, not a time any row records.
    const allowed = new Set([join(ROOT, "packages", "storage", "src", "sqlite", "retry-while-busy.ts")]);
    const offenders = sourceFiles(join(ROOT, "packages", "storage", "src")).filter(
      (file) => !allowed.has(file) && /new Date\(\)|Date\.now\(\)|systemClock/.test(readFileSync(file, "utf8")),
    );
    assert.deepEqual(offenders, []);
  });
});

/** Every module specifier a file imports or re-exports, statically or with import(), as written. */
function specifiersOf(file: string): string[] {
  return [...readFileSync(file, "utf8").matchAll(/\b(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((m) => m[1] ?? "");
}

/** `file`'s imports that break its wing's rule: `refused` for a bare specifier, `allowed` for a file it resolves to. */
function wingOffences(
  wing: string,
  refused: (specifier: string) => boolean,
  allowed: (target: string) => boolean,
): string[] {
  const src = join(ROOT, "packages", "server", "src");
  return sourceFiles(join(src, wing)).flatMap((file) =>
    specifiersOf(file)
      .filter((specifier) =>
        specifier.startsWith(".") ? !allowed(relative(src, resolve(dirname(file), specifier))) : refused(specifier),
      )
      .map((specifier) => `${relative(src, file)} imports ${specifier}`),
  );
}

describe("packages/server's two wings", () => {
  it("src/domain/ never sees HTTP or the host: no fastify, @fastify/*, @kiln/host, and no file outside src/domain/", () => {
    const offences = wingOffences(
      "domain",
      (specifier) => /^(fastify|@fastify\/|@kiln\/host)(\/|$)/.test(specifier),
      (target) => target.startsWith("domain/"),
    );
    assert.deepEqual(offences, []);
  });

  it("src/web/ calls the domain and nothing above it: no file outside src/web/ and src/domain/", () => {
    const offences = wingOffences(
      "web",
      () => false,
      (target) => target.startsWith("web/") || target.startsWith("domain/"),
    );
    assert.deepEqual(offences, []);
  });

  it("biome.json refuses the same imports in src/domain/", () => {
    const config = JSON.parse(readFileSync(join(ROOT, "biome.json"), "utf8")) as {
      overrides: { includes: string[]; linter?: { rules?: { style?: { noRestrictedImports?: unknown } } } }[];
    };
    const domain = config.overrides.find((o) => o.includes.includes("packages/server/src/domain/**"));
    const rule = domain?.linter?.rules?.style?.noRestrictedImports as
      | { options: { patterns: { group: string[] }[] } }
      | undefined;
    const groups = (rule?.options.patterns ?? []).flatMap((p) => p.group);
    for (const refused of ["fastify", "@fastify/*", "**/web/**"]) assert.ok(groups.includes(refused), refused);
    assert.ok(groups.includes("@kiln/*") && !groups.includes("!@kiln/host"), "@kiln/host is refused");
  });
});
