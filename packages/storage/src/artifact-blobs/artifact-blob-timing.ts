/**
 * How long after its last publication or put (`touched_at`), and after its last artifact
 * expired, a digest's bytes are kept before the sweep may mark them. It covers what no lock
 * covers: the moments between a writer's put and the record that names the blob (a source part
 * recorded after its bytes, Cargo output and artifacts reported after they were stored), and
 * clocks of several kiln-servers that disagree. A publication that comes later still never
 * publishes swept bytes (record-published-blobs.ts); it only costs a retry.
 */
export const ARTIFACT_BLOB_GRACE_SECONDS = 3600;

/**
 * How long a sweep's `deleting` mark is its own: a mark older than this was left by a sweep that
 * died or whose delete failed, and the next sweep (or a put waiting for it) takes it over. One
 * blob delete takes far less; a sweep paused for longer than this mid-delete is reported.
 */
export const ARTIFACT_BLOB_MARK_LEASE_SECONDS = 300;
