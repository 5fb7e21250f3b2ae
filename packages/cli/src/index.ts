export { buildProgram, KILN_CLI_VERSION } from "./program.js";
