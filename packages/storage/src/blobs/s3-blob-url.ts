/**
 * Where S3 blobs live, from KILN_BLOB_URL:
 * `s3://bucket/prefix?endpoint=http://127.0.0.1:4568&region=us-east-1&force_path_style=true`.
 * Only the place goes in the URL; credentials come from the AWS SDK's own chain (AWS_ACCESS_KEY_ID
 * and AWS_SECRET_ACCESS_KEY, a profile, an instance role), so no secret sits in kiln's settings.
 */
export interface S3BlobLocation {
  readonly bucket: string;
  /** Key prefix without leading or trailing slash; "" for the bucket's root. */
  readonly prefix: string;
  /** An S3-compatible endpoint (MinIO, Ceph, a test server); undefined for AWS itself. */
  readonly endpoint: string | undefined;
  /** undefined leaves the region to the SDK's chain (AWS_REGION, the profile). */
  readonly region: string | undefined;
  /** Path-style addressing (`endpoint/bucket/key`), which most S3-compatible servers need. */
  readonly forcePathStyle: boolean;
}

const KNOWN_PARAMETERS = new Set(["endpoint", "region", "force_path_style"]);

/** Parses KILN_BLOB_URL; throws a message naming the setting for anything it cannot honour. */
export function parseS3BlobUrl(text: string): S3BlobLocation {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`KILN_BLOB_URL must be an s3://bucket/prefix URL, got ${JSON.stringify(text)}`);
  }
  if (url.protocol !== "s3:") throw new Error(`KILN_BLOB_URL must be an s3:// URL, got ${url.protocol}//`);
  if (url.username !== "" || url.password !== "") {
    // A key in the URL would end up in logs and process listings; the SDK chain has a place for it.
    throw new Error("KILN_BLOB_URL must not carry credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
  const bucket = url.hostname;
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new Error(`KILN_BLOB_URL names no valid bucket: ${JSON.stringify(bucket)}`);
  }
  for (const name of url.searchParams.keys()) {
    if (!KNOWN_PARAMETERS.has(name)) throw new Error(`KILN_BLOB_URL has an unknown parameter ${name}`);
  }
  const endpoint = url.searchParams.get("endpoint") || undefined;
  if (endpoint !== undefined && !/^https?:\/\//.test(endpoint)) {
    throw new Error(`KILN_BLOB_URL endpoint must be an http(s):// URL, got ${JSON.stringify(endpoint)}`);
  }
  const pathStyle = url.searchParams.get("force_path_style") ?? "false";
  if (pathStyle !== "true" && pathStyle !== "false") {
    throw new Error(`KILN_BLOB_URL force_path_style must be true or false, got ${JSON.stringify(pathStyle)}`);
  }
  return {
    bucket,
    prefix: decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, ""),
    endpoint,
    region: url.searchParams.get("region") || undefined,
    forcePathStyle: pathStyle === "true",
  };
}
