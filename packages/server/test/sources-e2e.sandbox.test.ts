import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Embedded, explainJob, startEmbedded } from "../src/testing/e2e-jobs.js";
import { archiveOf, archiveSubmission, Sources } from "./source-archives.js";

/**
 * A streamed archive through the whole service with real cargo in the real sandbox: the
 * files the host materializes are exactly the verified archive's — an executable stays
 * executable and a symlink stays a symlink.
 */
describe("a streamed source archive runs as a real cargo job", () => {
  let embedded: Embedded;
  before(async () => {
    embedded = await startEmbedded();
  });
  after(() => embedded.close());

  it("uploads a crate in parts, verifies it, and the job passes with the executable and the symlink preserved", async () => {
    const sources = new Sources(embedded.app, embedded.token);
    const archive = archiveOf(
      [
        {
          path: "Cargo.toml",
          content: '[package]\nname = "streamed"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
        },
        { path: "scripts/tool.sh", content: "#!/bin/sh\necho tool\n", executable: true },
        {
          path: "src/lib.rs",
          content: `pub fn answer() -> u32 { 42 }\n\n#[cfg(test)]\nmod tests {\n    use std::os::unix::fs::PermissionsExt;\n    #[test]\n    fn answers() {\n        assert_eq!(super::answer(), 42);\n    }\n    #[test]\n    fn tree_is_exact() {\n        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));\n        let link = root.join("src/again.rs");\n        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());\n        assert_eq!(std::fs::read_link(&link).unwrap(), std::path::PathBuf::from("lib.rs"));\n        assert_eq!(std::fs::read_to_string(&link).unwrap(), std::fs::read_to_string(root.join("src/lib.rs")).unwrap());\n        let mode = std::fs::metadata(root.join("scripts/tool.sh")).unwrap().permissions().mode();\n        assert_eq!(mode & 0o111, 0o111, "executable bit kept");\n        let plain = std::fs::metadata(root.join("Cargo.toml")).unwrap().permissions().mode();\n        assert_eq!(plain & 0o111, 0, "plain file not executable");\n        let out = std::process::Command::new(root.join("scripts/tool.sh")).output().unwrap();\n        assert_eq!(String::from_utf8_lossy(&out.stdout), "tool\\n");\n    }\n}\n`,
        },
      ],
      [{ path: "src/again.rs", target: "lib.rs" }],
      { partBytes: 256 },
    );
    assert.ok(archive.parts.length > 1, "the crate spans several parts");
    const completed = await sources.upload(archive, "e2e-upload");
    assert.equal(completed.status, 200, completed.body);
    assert.equal(completed.json().state, "verified");

    const res = await embedded.jobs.api("POST", "/api/v4/jobs", {
      key: "e2e-archive-job",
      body: archiveSubmission("e2e-upload", archive.manifestSha256, { arguments: ["--no-fail-fast"] }),
    });
    assert.equal(res.status, 200, res.body);
    const id = res.json() as string;
    const job = await embedded.jobs.settle(id);
    assert.equal(job.status, "passed", await explainJob(embedded.jobs, id));
    const evidence = await embedded.jobs.evidence(id);
    const names = (evidence.report.tests as { name: string; outcome: string }[]).map((t) => `${t.name}=${t.outcome}`);
    assert.ok(
      names.some((n) => /tree_is_exact=passed/.test(n)),
      JSON.stringify(names),
    );
    assert.ok(
      names.some((n) => /answers=passed/.test(n)),
      JSON.stringify(names),
    );
  });
});
