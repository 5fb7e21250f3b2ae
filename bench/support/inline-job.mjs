// The jobs.submit body the benches send: a source given inline, not uploaded first.

const { inlineSubmission } = await import("@kiln/server/testing");

/**
 * `cargo <operation>` (test unless named) of `files` (inline) in `repository` at `size`, on branch
 * main of a fixed commit: the tests' own submission literal (@kiln/server/testing).
 */
export const inlineJob = (repository, size, files, operation = "test") =>
  inlineSubmission(repository, operation, files, { size });
