import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

/**
 * The benchmarks in bench/ are plain scripts that import kiln's built packages by name; nothing
 * type-checks them, and `npm test` does not run them (they measure speed, on a quiet machine).
 * So a renamed or removed export breaks a bench silently until someone runs it (stream-latency
 * imported an enrollment function the mutual-TLS host protocol had removed). This test reads
 * every bench's and every shared module's (bench/support/) `const { … } = await import(…)` of a
 * kiln package or of a built file (through the `dist` helper the file defines or imports from a
 * support module) and checks each name is exported there; and that what a bench imports from a
 * support module is exported by it.
 */
const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url));
const benchDir = join(repositoryRoot, "bench");

const IMPORT = /const \{([^}]+)\} = await import\(\s*(?:"(@kiln\/[^"]+)"|dist\(([^)]*)\))\s*\)/g;
const DIST_HELPER = /const dist = \(([^)]*)\) => (join\([^;]*\));/;
/** An import of a module beside the file (static or awaited): a bench's of bench/support/, or one support module's of another. */
const LOCAL_IMPORT = /(?:import \{([^}]+)\} from |const \{([^}]+)\} = await import\()"(\.\/[^"]+\.mjs)"/g;

/** The names a destructuring or an import list takes (`a: b` and `a as b` take `a`). */
function importedNames(list: string): string[] {
  return list
    .split(",")
    .map((member) => member.trim())
    .filter((member) => member !== "" && !member.startsWith("..."))
    .map((member) => (member.split(/:|\sas\s/)[0] ?? "").trim());
}

function distHelperOf(file: string): ((...args: string[]) => string) | null {
  const source = readFileSync(file, "utf8");
  const helper = DIST_HELPER.exec(source);
  if (!helper) {
    // No helper of its own: the one it imports from a support module, if it does.
    for (const [, staticList, awaitedList, path = ""] of source.matchAll(LOCAL_IMPORT)) {
      if (importedNames(staticList ?? awaitedList ?? "").includes("dist"))
        return distHelperOf(join(dirname(file), path));
    }
    return null;
  }
  // The file's own helper, evaluated with its own parameters over this checkout's root.
  const make = new Function("join", "root", `return (${helper[1]}) => ${helper[2]};`) as (
    j: typeof join,
    root: string,
  ) => (...args: string[]) => string;
  return make(join, repositoryRoot);
}

describe("bench/ scripts import what kiln exports", () => {
  const benches = [
    ...readdirSync(benchDir).filter((name) => name.endsWith(".mjs")),
    ...readdirSync(join(benchDir, "support"))
      .filter((name) => name.endsWith(".mjs"))
      .map((name) => `support/${name}`),
  ];

  it("finds the benches and their imports", () => {
    assert.ok(benches.length >= 10, `only ${benches.length} benches found in ${benchDir}`);
    const imports = benches.flatMap((bench) => [...readFileSync(join(benchDir, bench), "utf8").matchAll(IMPORT)]);
    assert.ok(imports.length >= 30, `only ${imports.length} imports recognised: the pattern no longer reads them`);
  });

  for (const bench of benches) {
    it(bench, async () => {
      const file = join(benchDir, bench);
      const source = readFileSync(file, "utf8");
      const dist = distHelperOf(file);
      for (const match of source.matchAll(IMPORT)) {
        const [, list = "", packageName, distArgs] = match;
        let specifier: string;
        if (packageName !== undefined) {
          specifier = packageName;
        } else {
          assert.ok(dist, `${bench} imports through dist(${distArgs}) but has no dist helper this test reads`);
          const args = JSON.parse(`[${distArgs ?? ""}]`) as string[];
          specifier = pathToFileURL(dist(...args)).href;
        }
        const module = (await import(specifier)) as Record<string, unknown>;
        for (const name of importedNames(list)) {
          assert.ok(name in module, `${bench}: ${name} is not exported by ${packageName ?? distArgs}`);
        }
      }
      for (const [, staticList, awaitedList, path = ""] of source.matchAll(LOCAL_IMPORT)) {
        const module = (await import(pathToFileURL(join(dirname(file), path)).href)) as Record<string, unknown>;
        for (const name of importedNames(staticList ?? awaitedList ?? "")) {
          assert.ok(name in module, `${bench}: ${name} is not exported by ${path}`);
        }
      }
    });
  }
});
