import type { TomlReader } from "../jobs/toml-document.js";

/** Where the repository's own configuration sets a key, or why it could not be read. */
export type ConfigurationAnswer = { set: true; where: string } | { set: false } | { unreadable: string };

/**
 * What the repository's own Cargo configuration sets, as cargo would see it for a job whose
 * working directory is `workingDirectory`: the `.cargo/config.toml` (and legacy `.cargo/config`)
 * of that directory and of each ancestor up to the source root, and the `[profile]` tables of
 * the Cargo.toml files on the same path. Cargo honours `[profile]` only in the workspace root's
 * manifest; counting every manifest on the path can only make kiln leave more alone, never
 * replace a setting the repository made.
 */
export class RepositoryCargoConfiguration {
  private constructor(private readonly documents: readonly { path: string; toml: unknown; error: string | null }[]) {}

  static async read(toml: TomlReader, workingDirectory: string): Promise<RepositoryCargoConfiguration> {
    const dirs: string[] = [];
    const segments = workingDirectory === "." ? [] : workingDirectory.split("/");
    for (let i = segments.length; i >= 0; i--) dirs.push(segments.slice(0, i).join("/"));
    const documents = [];
    for (const dir of dirs) {
      const prefix = dir === "" ? "" : `${dir}/`;
      for (const name of [".cargo/config.toml", ".cargo/config", "Cargo.toml"]) {
        const path = `${prefix}${name}`;
        const document = await toml(path);
        if (document === null) continue;
        documents.push(
          "toml" in document ? { path, toml: document.toml, error: null } : { path, toml: null, error: document.error },
        );
      }
    }
    return new RepositoryCargoConfiguration(documents);
  }

  /**
   * Whether a dotted configuration key (`build.jobs`, `profile.dev.debug`) is set. Keys under
   * `profile.` are looked up in manifests and configuration files, others in configuration
   * files only. An unparseable file answers `unreadable`: kiln cannot tell, so it leaves the
   * setting alone.
   */
  sets(key: string): ConfigurationAnswer {
    const inManifests = key.startsWith("profile.");
    for (const doc of this.documents) {
      const isManifest = doc.path === "Cargo.toml" || doc.path.endsWith("/Cargo.toml");
      if (isManifest && !inManifests) continue;
      if (doc.error !== null) return { unreadable: `${doc.path} could not be read (${doc.error})` };
      if (lookup(doc.toml, key) !== undefined) return { set: true, where: doc.path };
    }
    return { set: false };
  }

  /** A value of the working directory's or an ancestor's manifest (e.g. `workspace.metadata.kiln.…`). */
  manifestValue(key: string): { value: unknown; where: string } | undefined {
    for (const doc of this.documents) {
      if (!(doc.path === "Cargo.toml" || doc.path.endsWith("/Cargo.toml")) || doc.error !== null) continue;
      const value = lookup(doc.toml, key);
      if (value !== undefined) return { value, where: doc.path };
    }
    return undefined;
  }
}

function lookup(toml: unknown, key: string): unknown {
  let node: unknown = toml;
  for (const part of key.split(".")) {
    if (typeof node !== "object" || node === null || !(part in node)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}
