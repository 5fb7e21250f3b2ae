import { randomBytes, randomUUID } from "node:crypto";

/** `job_` + milliseconds in base36 (sorts by creation) + 8 random hex digits. */
export function newJobId(now: Date): string {
  return `job_${now.getTime().toString(36).padStart(9, "0")}${randomBytes(4).toString("hex")}`;
}

/** A lease token names one holder of one attempt; it fences every report for it. */
export function newLeaseToken(): string {
  return randomUUID();
}
