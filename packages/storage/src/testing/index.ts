export {
  createPostgresTestDatabase,
  DIALECTS,
  type DialectUnderTest,
  openSqliteForTest,
  type TestDatabase,
} from "./test-databases.js";
