/**
 * The frames both isolations carry a command's output in, in the order it was written: one byte
 * for the stream (1 stdout, 2 stderr), four for the length (big-endian), then the bytes. The
 * sandbox's relay (sandbox/ordered-output.ts) and the microVM's guest agent
 * (packages/host/guest-agent) send them; the microVM's agent ends its output with an empty frame
 * of stream 0, so the host knows it has every byte before the VM powers off.
 */

export type OutputStream = "stdout" | "stderr";

const STREAMS: Record<number, OutputStream> = { 1: "stdout", 2: "stderr" };

/**
 * Decodes the relay's frames from the chunks of its pipe, calling `onOutput` once per frame in
 * the order they were written. A frame split across chunks waits for its rest; `end()` reports
 * a cut-off frame (the relay died mid-frame) as bytes that were lost, never as output.
 */
export class OutputFrames {
  #pending: Buffer = Buffer.alloc(0);

  constructor(
    private readonly onOutput: (stream: OutputStream, chunk: Buffer) => void,
    private readonly options: {
      /** Where the end frame (stream 0, no bytes) goes; without it, such a frame is refused as any unknown stream. */
      readonly onEnd?: () => void;
      /**
       * The longest frame a sender may announce: a sender that is not trusted (a microVM's guest)
       * could otherwise make the host hold any amount while it waits for a frame's rest.
       */
      readonly maxFrameBytes?: number;
    } = {},
  ) {}

  push(chunk: Buffer): void {
    let data = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    while (data.length >= 5) {
      const length = data.readUInt32BE(1);
      if (length > (this.options.maxFrameBytes ?? Number.POSITIVE_INFINITY))
        throw new Error(
          `the output relay announced a frame of ${length} bytes, more than ${this.options.maxFrameBytes}`,
        );
      if (data.length < 5 + length) break;
      const stream = STREAMS[data[0] ?? 0];
      if (data[0] === 0 && length === 0 && this.options.onEnd !== undefined) this.options.onEnd();
      else if (stream === undefined) throw new Error(`the output relay sent a frame for stream ${data[0]}`);
      else this.onOutput(stream, data.subarray(5, 5 + length));
      data = data.subarray(5 + length);
    }
    this.#pending = data.length === 0 ? Buffer.alloc(0) : Buffer.from(data);
  }

  /** Bytes of a frame the relay began but did not finish (0 when it ended cleanly). */
  end(): number {
    const cut = this.#pending.length;
    this.#pending = Buffer.alloc(0);
    return cut;
  }
}
