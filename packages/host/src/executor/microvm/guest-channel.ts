/**
 * The host's side of the guest agent's control port (`kiln.control`, a virtio-serial port QEMU
 * binds to a socket the host holds; packages/host/guest-agent/src/main.rs says the protocol):
 * the request it sends once the agent said `hello`, and the agent's lines, read defensively —
 * whatever a guest says is untrusted, so a line is bounded, and anything that is not one of the
 * agent's lines is ignored.
 */

/** The agent's lines, as the host understands them. */
export type GuestLine =
  | { readonly kind: "hello" }
  | { readonly kind: "ready" }
  | {
      readonly kind: "exit";
      readonly code: number | null;
      readonly signal: number | null;
      /** The guest kernel's OOM kills while the command ran. */
      readonly oomKills: number;
      /** Forks the command's cgroup refused at its pids limit. */
      readonly pidsRefused: number;
    }
  | {
      readonly kind: "counters";
      /** The guest kernel's OOM kills since the command started, and the forks its cgroup refused: so far. */
      readonly oomKills: number;
      readonly pidsRefused: number;
    }
  | { readonly kind: "error"; readonly message: string }
  | { readonly kind: "probed"; readonly kernelRelease: string };

/** The longest line the host keeps reading; an agent never says more on one. */
const MAX_LINE_BYTES = 8192;

const count = (text: string | undefined) => (text !== undefined && /^\d{1,15}$/.test(text) ? Number(text) : null);

export function parseGuestLine(line: string): GuestLine | null {
  const [word, ...rest] = line.split(" ");
  switch (word) {
    case "hello":
    case "ready":
      return rest.length === 0 ? { kind: word } : null;
    case "exit": {
      const [code, signal, ooms, refused] = rest;
      if (rest.length !== 4 || count(ooms) === null || count(refused) === null) return null;
      return {
        kind: "exit",
        code: code === "-" ? null : count(code),
        signal: signal === "-" ? null : count(signal),
        oomKills: count(ooms) ?? 0,
        pidsRefused: count(refused) ?? 0,
      };
    }
    case "counters": {
      const [ooms, refused] = rest;
      const oomKills = count(ooms);
      const pidsRefused = count(refused);
      if (rest.length !== 2 || oomKills === null || pidsRefused === null) return null;
      return { kind: "counters", oomKills, pidsRefused };
    }
    case "error":
      return { kind: "error", message: rest.join(" ").slice(0, 2000) };
    case "probed":
      return { kind: "probed", kernelRelease: rest.join(" ").slice(0, 200) };
    default:
      return null;
  }
}

/** Splits the control port's bytes into the agent's lines, dropping anything overlong. */
export class GuestLineReader {
  #pending = "";

  constructor(private readonly onLine: (line: GuestLine) => void) {}

  push(chunk: Buffer): void {
    this.#pending += chunk.toString("utf8");
    for (let end = this.#pending.indexOf("\n"); end >= 0; end = this.#pending.indexOf("\n")) {
      const line = parseGuestLine(this.#pending.slice(0, end));
      this.#pending = this.#pending.slice(end + 1);
      if (line !== null) this.onLine(line);
    }
    if (this.#pending.length > MAX_LINE_BYTES) this.#pending = "";
  }
}

/** What the host says to the agent after the request, one byte each (main.rs says what the agent does). */
export const HOST_SAYS = {
  /** Answer with a `counters` line: the host asks before it kills a VM whose command has not exited. */
  counters: Buffer.from("c"),
  /** The host has the output's end frame and the `exit` line: the agent may power off. */
  acknowledged: Buffer.from("k"),
} as const;

/** The request: a little-endian u32 length, then NUL-terminated key and value strings in turn. */
export function encodeRequest(fields: readonly (readonly [string, string])[]): Buffer {
  for (const [name, value] of fields)
    if (name.includes("\0") || value.includes("\0")) throw new Error(`request field ${name} holds a NUL`);
  const body = Buffer.from(fields.map(([name, value]) => `${name}\0${value}\0`).join(""), "utf8");
  const length = Buffer.alloc(4);
  length.writeUInt32LE(body.length);
  return Buffer.concat([length, body]);
}

/**
 * When the host lets the guest agent power off (`HOST_SAYS.acknowledged`): once it has both the
 * agent's `exit` line (control port) and the output's end frame (output port). They travel on
 * different ports and arrive in either order; the end frame is queued behind every write of the
 * command, so once it is here every byte of output is. Acknowledged on the exit line alone, the
 * agent would power off while the command's last output still sat in the output port's queue or
 * in QEMU's socket, and it would be lost with the VM. Acknowledges once.
 */
export class PowerOffAcknowledgement {
  #exited = false;
  #outputEnded = false;
  #sent = false;

  constructor(private readonly acknowledge: () => void) {}

  /** The agent's `exit` line arrived. */
  exited(): void {
    this.#exited = true;
    this.#acknowledgeOnceComplete();
  }

  /** The output's end frame arrived. */
  outputEnded(): void {
    this.#outputEnded = true;
    this.#acknowledgeOnceComplete();
  }

  #acknowledgeOnceComplete(): void {
    if (!this.#exited || !this.#outputEnded || this.#sent) return;
    this.#sent = true;
    this.acknowledge();
  }
}
