/**
 * @kiln/contract/testing: what the tests of every package share and no production code
 * loads (the contract's index does not export it): the one test clock.
 */
export * from "./manual-clock.js";
