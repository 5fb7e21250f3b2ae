import type { SourceReservation } from "@kiln/contract";
import type { Static } from "@sinclair/typebox";

/**
 * Names for the parts of a SourceReservation the handlers work with, derived from the
 * contract's schema (never written out again): the reservation, its manifest, entries,
 * files, parts, segments and totals.
 */
export type Reservation = Static<typeof SourceReservation>;
export type SourceManifest = Reservation["manifest"];
export type ManifestEntry = SourceManifest["entries"][number];
export type ManifestFile = Extract<ManifestEntry, { kind: "file" }>;
export type ManifestSymlink = Extract<ManifestEntry, { kind: "symlink" }>;
export type ManifestPart = SourceManifest["parts"][number];
export type ManifestSegment = ManifestFile["segments"][number];
export type SourceTotals = Reservation["totals"];
