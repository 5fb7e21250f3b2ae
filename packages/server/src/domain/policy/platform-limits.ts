import { SIZES } from "@kiln/contract";

/** Platform limits a job carries (DESIGN.md §6; a repository setting may lower the ceiling). */
export const PLATFORM_WALL_CLOCK_SECONDS = 3600;
export const MAX_ATTEMPTS = 3;
export const ARTIFACT_RETENTION_SECONDS = 7 * 24 * 3600;

/**
 * vCPUs, memory (DESIGN.md §6) and disk of each size. The disk quota bounds what one job's
 * target dir may hold, its lineage's warm state included (docs/sandbox.md): four times the
 * memory, room for the debug target dir of a large workspace, and what a host's volume must
 * hold per concurrent attempt of the size.
 */
export const SIZE_SHAPES: Readonly<Record<string, { vcpus: number; memoryBytes: number; diskBytes: number }>> = {
  "kiln2-cpu": { vcpus: 2, memoryBytes: 4 * 2 ** 30, diskBytes: 16 * 2 ** 30 },
  "kiln4-cpu": { vcpus: 4, memoryBytes: 8 * 2 ** 30, diskBytes: 32 * 2 ** 30 },
  "kiln8-cpu": { vcpus: 8, memoryBytes: 16 * 2 ** 30, diskBytes: 64 * 2 ** 30 },
  "kiln16-cpu": { vcpus: 16, memoryBytes: 32 * 2 ** 30, diskBytes: 128 * 2 ** 30 },
};

export const VCPUS_OF_SIZE: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(SIZE_SHAPES).map(([size, shape]) => [size, shape.vcpus]),
);

export const DISK_BYTES_OF_SIZE: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(SIZE_SHAPES).map(([size, shape]) => [size, shape.diskBytes]),
);

export type Size = (typeof SIZES)[number];

/** A job's size as admission stored it (jobs.submit accepts only the contract's sizes). */
export function admittedSize(size: string): Size {
  const found = SIZES.find((s) => s === size);
  if (found === undefined) throw new Error(`a job's stored size ${size} is not one of the platform's sizes`);
  return found;
}
