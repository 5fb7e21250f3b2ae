export * from "./create-client.js";
export * from "./errors.js";
export * from "./server-sent-events.js";
