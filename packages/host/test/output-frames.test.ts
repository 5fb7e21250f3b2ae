/**
 * The frames a command's output travels in (shared/output-frames.ts), as the sandbox's relay and
 * the microVM's guest agent send them, and the agent's control lines (microvm/guest-channel.ts):
 * what the host accepts from a sender it does not trust.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GuestLineReader, PowerOffAcknowledgement, parseGuestLine } from "../src/executor/microvm/guest-channel.js";
import { OutputFrames, type OutputStream } from "../src/executor/shared/output-frames.js";

const frame = (stream: number, text: string) => {
  const bytes = Buffer.from(text);
  const header = Buffer.alloc(5);
  header[0] = stream;
  header.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([header, bytes]);
};

describe("output frames", () => {
  it("calls onOutput once per frame in order, a frame split across chunks waiting for its rest", () => {
    const seen: [OutputStream, string][] = [];
    const frames = new OutputFrames((stream, chunk) => seen.push([stream, chunk.toString()]));
    const all = Buffer.concat([frame(1, "out one\n"), frame(2, "err one\n"), frame(1, "out two\n")]);
    const cuts = [0, 3, 7, 14, 20, all.length];
    for (const [index, at] of cuts.slice(0, -1).entries()) frames.push(all.subarray(at, cuts[index + 1]));
    assert.deepEqual(seen, [
      ["stdout", "out one\n"],
      ["stderr", "err one\n"],
      ["stdout", "out two\n"],
    ]);
    assert.equal(frames.end(), 0);
  });

  it("reports the microVM agent's end frame (stream 0, empty) where asked to, and refuses it as an unknown stream otherwise", () => {
    let ended = 0;
    const seen: string[] = [];
    const frames = new OutputFrames((_, chunk) => seen.push(chunk.toString()), { onEnd: () => ended++ });
    frames.push(Buffer.concat([frame(1, "last\n"), frame(0, "")]));
    assert.deepEqual(seen, ["last\n"]);
    assert.equal(ended, 1);
    assert.throws(() => new OutputFrames(() => {}).push(frame(0, "")), /frame for stream 0/);
    assert.throws(() => frames.push(frame(3, "x")), /frame for stream 3/);
  });

  it("refuses a frame announced longer than its bound before holding any of it", () => {
    const frames = new OutputFrames(() => {}, { maxFrameBytes: 1024 });
    const header = Buffer.alloc(5);
    header[0] = 1;
    header.writeUInt32BE(2 ** 31, 1);
    assert.throws(() => frames.push(header), /announced a frame of 2147483648 bytes, more than 1024/);
    // Within the bound, a frame's bytes are held until it is whole.
    const ok = new OutputFrames(() => {}, { maxFrameBytes: 1024 });
    ok.push(frame(1, "x".repeat(1024)).subarray(0, 100));
    assert.equal(ok.end(), 100, "the cut-off frame's bytes are reported as lost");
  });
});

describe("the guest agent's control lines", () => {
  it("reads the counters the agent answers before a kill, and the exit line's", () => {
    assert.deepEqual(parseGuestLine("counters 1 4155"), { kind: "counters", oomKills: 1, pidsRefused: 4155 });
    assert.deepEqual(parseGuestLine("exit 101 - 0 3"), {
      kind: "exit",
      code: 101,
      signal: null,
      oomKills: 0,
      pidsRefused: 3,
    });
    for (const line of ["counters", "counters 1", "counters 1 2 3", "counters -1 2", "counters 1 x", "counters 1e3 2"])
      assert.equal(parseGuestLine(line), null, line);
  });
});

describe("the power-off acknowledgement", () => {
  /** The host's two ports as the microVM executor reads them: what happened, in order. */
  const ports = () => {
    const events: string[] = [];
    const gate = new PowerOffAcknowledgement(() => events.push("acknowledged"));
    const control = new GuestLineReader((line) => {
      if (line.kind === "exit") {
        events.push("exit");
        gate.exited();
      }
    });
    const output = new OutputFrames((stream, chunk) => events.push(`${stream} ${chunk}`), {
      onEnd: () => {
        events.push("end");
        gate.outputEnded();
      },
    });
    return { events, control, output };
  };

  it("lets the agent power off only once the exit line and the output's end frame are both here, so output behind the exit line is kept", () => {
    // The exit line overtakes the command's last output (they travel on different ports): the VM
    // must stay up until that output and the end frame behind it have arrived.
    const { events, control, output } = ports();
    output.push(frame(1, "first\n"));
    control.push(Buffer.from("exit 0 - 0 0\n"));
    assert.deepEqual(events, ["stdout first\n", "exit"], "no acknowledgement on the exit line alone");
    output.push(frame(1, "last\n"));
    output.push(frame(0, ""));
    assert.deepEqual(events, ["stdout first\n", "exit", "stdout last\n", "end", "acknowledged"]);
    // Anything the guest repeats changes nothing: one acknowledgement.
    control.push(Buffer.from("exit 0 - 0 0\n"));
    output.push(frame(0, ""));
    assert.equal(events.filter((e) => e === "acknowledged").length, 1);
  });

  it("acknowledges on the exit line when the output's end came first, and never on the end frame alone", () => {
    const { events, control, output } = ports();
    output.push(Buffer.concat([frame(2, "warning\n"), frame(0, "")]));
    assert.deepEqual(events, ["stderr warning\n", "end"], "no acknowledgement before the exit line");
    control.push(Buffer.from("exit 3 - 0 0\n"));
    assert.deepEqual(events, ["stderr warning\n", "end", "exit", "acknowledged"]);
  });
});
