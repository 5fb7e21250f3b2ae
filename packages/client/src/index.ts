export type { InputOf, OutputOf } from "@kiln/contract";
export * from "./create-client.js";
export * from "./errors.js";
export * from "./server-sent-events.js";
