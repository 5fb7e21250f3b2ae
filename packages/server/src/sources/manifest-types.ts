/** The SourceReservation's manifest as the handlers read it (validated by its schema first). */
export interface ManifestSegment {
  readonly part: number;
  readonly offset: number;
  readonly length: number;
}

export interface ManifestFile {
  readonly kind: "file";
  readonly path: string;
  readonly executable: boolean;
  readonly size: number;
  readonly sha256: string;
  readonly segments: readonly ManifestSegment[];
}

export interface ManifestSymlink {
  readonly kind: "symlink";
  readonly path: string;
  readonly target: string;
}

export type ManifestEntry = ManifestFile | ManifestSymlink;

export interface ManifestPart {
  readonly part: number;
  readonly sha256: string;
  readonly bytes: number;
}

export interface SourceManifest {
  readonly entries: readonly ManifestEntry[];
  readonly parts: readonly ManifestPart[];
}

export interface SourceTotals {
  readonly file_bytes: number;
  readonly entries: number;
  readonly directories: number;
  readonly metadata_bytes: number;
  readonly parts: number;
  readonly part_bytes: number;
}

export interface Reservation {
  readonly repository: string;
  readonly format_version: number;
  readonly totals: SourceTotals;
  readonly manifest: SourceManifest;
}
