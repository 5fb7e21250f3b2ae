export * from "./executor/executor.js";
