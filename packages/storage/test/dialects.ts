/**
 * The engines every storage test runs against; defined in `src/testing/` so other packages
 * (`@kiln/storage/testing`) run their suites on the same ones.
 */
export { DIALECTS, type DialectUnderTest, type TestDatabase } from "../src/testing/index.js";
