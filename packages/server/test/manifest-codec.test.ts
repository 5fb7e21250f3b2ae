import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { deflateManifestJson, manifestJsonOf } from "../src/domain/sources/manifest-codec.js";

describe("an upload's stored manifest (domain/sources/manifest-codec.ts)", () => {
  const json = JSON.stringify({
    entries: Array.from({ length: 2000 }, (_, i) => ({ kind: "file", path: `src/m${i}/f.rs`, size: i })),
    parts: [],
  });

  it("compresses the JSON into bytes of their own, and reads them back", async () => {
    const deflated = deflateManifestJson(json);
    // Handed over from the body worker: the bytes must be the whole of their buffer.
    assert.equal(deflated.byteOffset, 0);
    assert.equal(deflated.byteLength, deflated.buffer.byteLength);
    assert.ok(deflated.byteLength * 5 < Buffer.byteLength(json), `${deflated.byteLength} of ${json.length} bytes`);
    assert.equal(await manifestJsonOf({ manifest: "", manifest_deflated: deflated }), json);
  });

  it("reads a row reserved before the manifests were compressed as its text", async () => {
    assert.equal(await manifestJsonOf({ manifest: json, manifest_deflated: null }), json);
  });

  it("a small manifest (one that is not worth a buffer of its own in zlib) is still owned", async () => {
    const small = deflateManifestJson('{"entries":[],"parts":[]}');
    assert.equal(small.byteLength, small.buffer.byteLength);
    assert.equal(await manifestJsonOf({ manifest: "", manifest_deflated: small }), '{"entries":[],"parts":[]}');
  });
});
