/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as ext4 checksums its metadata: the
 * kernel's and e2fsprogs' `crc32c_le(seed, data)`, which neither inverts the seed nor the
 * result, so callers pass ext4's seed (~0) themselves. A table per byte: the superblock is one
 * KiB, so speed does not matter here.
 */
const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** crc32c_le over `data`, starting from `seed`; unsigned. */
export function crc32cLe(seed: number, data: Uint8Array): number {
  let crc = seed >>> 0;
  for (const byte of data) crc = ((TABLE[(crc ^ byte) & 0xff] as number) ^ (crc >>> 8)) >>> 0;
  return crc;
}
