export type { InputOf, OutputOf } from "@kiln/contract";
export * from "./check-input.js";
export * from "./create-client.js";
export * from "./errors.js";
export * from "./operator-session.js";
export * from "./server-sent-events.js";
