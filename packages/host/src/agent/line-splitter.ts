/**
 * Turns a stream's chunks into lines without splitting multi-byte characters or
 * losing a final line that has no newline.
 */
export class LineSplitter {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: Buffer): void {
    let data = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let newline = data.indexOf(10);
    while (newline >= 0) {
      const end = newline > 0 && data[newline - 1] === 13 ? newline - 1 : newline;
      this.onLine(data.subarray(0, end).toString("utf8"));
      data = data.subarray(newline + 1);
      newline = data.indexOf(10);
    }
    this.pending = Buffer.from(data);
  }

  end(): void {
    if (this.pending.length > 0) this.onLine(this.pending.toString("utf8"));
    this.pending = Buffer.alloc(0);
  }
}
