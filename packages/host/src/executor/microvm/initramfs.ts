/**
 * The microVM's initramfs, written as a "newc" cpio archive (the format the kernel unpacks,
 * Documentation/driver-api/early-userspace/buffer-format.rst): the guest agent as /init and the
 * kernel modules it loads. Written here rather than by `cpio` (not on a minimal Debian) because
 * the format is a fixed 110-byte ASCII header per entry, padded to four bytes.
 */

export interface InitramfsEntry {
  /** Relative, `/`-separated, no leading slash; parents listed before their children. */
  readonly path: string;
  readonly kind: "directory" | "file";
  /** Permission bits (0o755 for /init, 0o644 for a module). */
  readonly mode: number;
  readonly content?: Buffer;
}

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;

const padding = (length: number) => Buffer.alloc((4 - (length % 4)) % 4);

export function newcArchive(entries: readonly InitramfsEntry[]): Buffer {
  const chunks: Buffer[] = [];
  let inode = 1;
  const add = (path: string, mode: number, content: Buffer) => {
    const name = Buffer.from(`${path}\0`);
    const fields = [inode++, mode, 0, 0, 1, 0, content.length, 0, 0, 0, 0, name.length, 0];
    const header = Buffer.from(`070701${fields.map((f) => f.toString(16).padStart(8, "0")).join("")}`);
    chunks.push(header, name, padding(header.length + name.length), content, padding(content.length));
  };
  for (const entry of entries) {
    const type = entry.kind === "directory" ? S_IFDIR : S_IFREG;
    add(entry.path, type | (entry.mode & 0o7777), entry.content ?? Buffer.alloc(0));
  }
  add("TRAILER!!!", 0, Buffer.alloc(0));
  return Buffer.concat(chunks);
}
