// The jobs.submit body the benches send: a source given inline, not uploaded first.

/**
 * `cargo <operation>` (test unless named) of `files` (inline) in `repository` at `size`, on branch
 * main of a fixed commit.
 */
export const inlineJob = (repository, size, files, operation = "test") => ({
  schema_version: 1,
  repository,
  size,
  workspace: {
    base_commit: "0123456789abcdef0123456789abcdef01234567",
    branch: "main",
    invocation: { operation, arguments: [] },
    source: { files },
  },
});
