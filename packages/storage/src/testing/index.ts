export { attemptCompletion, claimAs, finishPlaced, queuedJob } from "./job-rows.js";
export { pathsOpenToOthers } from "./paths-open-to-others.js";
export { type S3TestServer, startS3TestServer } from "./s3-test-server.js";
export {
  createPostgresTestDatabase,
  DIALECTS,
  type DialectUnderTest,
  openSqliteForTest,
  type TestDatabase,
} from "./test-databases.js";
