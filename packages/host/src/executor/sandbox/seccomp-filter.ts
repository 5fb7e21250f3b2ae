/**
 * The sandbox's seccomp filter: a classic-BPF program bubblewrap loads (`--seccomp FD`) into
 * the job's command before it runs, so that everything the job starts carries it.
 *
 * Why a denylist: cargo, rustc, linkers, build scripts and tests may use any ordinary system
 * call (a test suite may exercise epoll, inotify, memfd, io vectors, signals, …), and an
 * allowlist would have to foresee all of them. What the sandbox must not offer is the kernel's
 * administrative and introspection surface, which a build never needs and which is where
 * unprivileged kernel exploits start: Docker's default profile refuses the same families. Most
 * of these calls already fail for lack of a capability (the sandbox has none, and no user
 * namespace it could gain them in); the filter refuses them before the kernel reaches any of
 * their code, and refuses the ones an unprivileged process may make (bpf, perf_event_open,
 * userfaultfd, io_uring, keyctl, process_vm_*, personality flags).
 *
 * Refused calls return EPERM, what a capability check would return, so programs that probe
 * for a feature fall back rather than crash. Exceptions:
 *  - clone3 answers ENOSYS: its flags are in memory a filter cannot read, and ENOSYS makes the
 *    C library (glibc ≥ 2.34, musl) and Rust's std fall back to clone, whose flags it can;
 *  - clone is refused only with a namespace flag (plain threads and forks pass);
 *  - personality passes only the values Docker passes (Linux, 32-bit Linux, UNAME26, querying);
 *  - a system call of another ABI (i386 via int 0x80, x32) kills the process: the numbers below
 *    are x86_64's, and a foreign ABI's numbers would reach the kernel unchecked.
 *
 * Only x86_64 is known here. On any other architecture `sandboxSeccompProgram` throws, so the
 * executor refuses to run jobs at all rather than run them unfiltered.
 */

/** One sock_filter instruction: 16-bit code, jump-if-true and jump-if-false offsets, 32-bit constant. */
interface Instruction {
  readonly code: number;
  readonly jt: number;
  readonly jf: number;
  readonly k: number;
}

// Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
const BPF_LD_W_ABS = 0x20; // A = *(u32 *)(seccomp_data + k)
const BPF_JMP_JEQ_K = 0x15; // pc += (A == k) ? jt : jf
const BPF_JMP_JGE_K = 0x35; // pc += (A >= k) ? jt : jf (unsigned)
const BPF_JMP_JSET_K = 0x45; // pc += (A & k) ? jt : jf
const BPF_RET_K = 0x06; // return k

// seccomp return actions (linux/seccomp.h).
export const SECCOMP_RET_KILL_PROCESS = 0x80000000;
export const SECCOMP_RET_ERRNO = 0x00050000;
export const SECCOMP_RET_ALLOW = 0x7fff0000;

const EPERM = 1;
const ENOSYS = 38;

/** Offsets in struct seccomp_data: nr (int), arch (u32), instruction_pointer (u64), args[6] (u64). */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** The low 32 bits of args[0] (little-endian). */
const OFFSET_ARG0_LOW = 16;

/** AUDIT_ARCH_X86_64 = EM_X86_64 (62) | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE. */
export const AUDIT_ARCH_X86_64 = 0xc000003e;
/** x32 system calls carry this bit in their number under AUDIT_ARCH_X86_64. */
const X32_SYSCALL_BIT = 0x40000000;

/**
 * Refused outright, with why. Numbers from the kernel's arch/x86/entry/syscalls/syscall_64.tbl
 * (asm/unistd_64.h); seccomp-filter.test.ts checks them against the installed header.
 */
export const DENIED_SYSCALLS_X86_64: Readonly<Record<string, { readonly nr: number; readonly why: string }>> = {
  ptrace: { nr: 101, why: "inspect or steer another process" },
  process_vm_readv: { nr: 310, why: "read another process's memory" },
  process_vm_writev: { nr: 311, why: "write another process's memory" },
  mount: { nr: 165, why: "change the mount table" },
  umount2: { nr: 166, why: "change the mount table" },
  pivot_root: { nr: 155, why: "change the root" },
  fsopen: { nr: 430, why: "the new mount API" },
  fsconfig: { nr: 431, why: "the new mount API" },
  fsmount: { nr: 432, why: "the new mount API" },
  fspick: { nr: 433, why: "the new mount API" },
  move_mount: { nr: 429, why: "the new mount API" },
  open_tree: { nr: 428, why: "the new mount API" },
  mount_setattr: { nr: 442, why: "the new mount API" },
  unshare: { nr: 272, why: "new namespaces" },
  setns: { nr: 308, why: "enter other namespaces" },
  keyctl: { nr: 250, why: "the kernel keyring (not namespaced)" },
  add_key: { nr: 248, why: "the kernel keyring (not namespaced)" },
  request_key: { nr: 249, why: "the kernel keyring (not namespaced)" },
  bpf: { nr: 321, why: "load eBPF programs" },
  perf_event_open: { nr: 298, why: "performance counters (a side channel and a frequent exploit path)" },
  userfaultfd: { nr: 323, why: "stall kernel page faults (a frequent exploit primitive)" },
  io_uring_setup: { nr: 425, why: "io_uring (a frequent exploit path; Docker's default refuses it too)" },
  io_uring_enter: { nr: 426, why: "io_uring" },
  io_uring_register: { nr: 427, why: "io_uring" },
  kexec_load: { nr: 246, why: "load a new kernel" },
  kexec_file_load: { nr: 320, why: "load a new kernel" },
  init_module: { nr: 175, why: "load kernel modules" },
  finit_module: { nr: 313, why: "load kernel modules" },
  delete_module: { nr: 176, why: "unload kernel modules" },
  open_by_handle_at: { nr: 304, why: "open files by handle, past the mount namespace" },
  name_to_handle_at: { nr: 303, why: "file handles, past the mount namespace" },
  swapon: { nr: 167, why: "swap devices" },
  swapoff: { nr: 168, why: "swap devices" },
  reboot: { nr: 169, why: "reboot the host" },
  acct: { nr: 163, why: "process accounting" },
  quotactl: { nr: 179, why: "disk quotas" },
  quotactl_fd: { nr: 443, why: "disk quotas" },
  lookup_dcookie: { nr: 212, why: "kernel profiling" },
  iopl: { nr: 172, why: "raw I/O port access" },
  ioperm: { nr: 173, why: "raw I/O port access" },
  syslog: { nr: 103, why: "the kernel log" },
  settimeofday: { nr: 164, why: "the host's clock" },
  clock_settime: { nr: 227, why: "the host's clock" },
  clock_adjtime: { nr: 305, why: "the host's clock" },
  fanotify_init: { nr: 300, why: "watch the whole file system" },
  uselib: { nr: 134, why: "an obsolete loader call" },
  vhangup: { nr: 153, why: "hang up the terminal" },
};

const CLONE_NR = 56;
const CLONE3_NR = 435;
const PERSONALITY_NR = 135;

/** CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET. */
export const CLONE_NAMESPACE_FLAGS = 0x7e020000;

/** PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32|UNAME26, and 0xffffffff (query the current one). */
export const ALLOWED_PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff] as const;

/** An instruction whose jumps name labels, resolved to offsets by `assemble`. */
type Step =
  | { readonly op: "load"; readonly offset: number }
  | {
      readonly op: "jump";
      readonly code: number;
      readonly k: number;
      readonly ifTrue: string;
      readonly ifFalse?: string;
    }
  | { readonly op: "return"; readonly value: number }
  | { readonly op: "label"; readonly name: string };

/** Resolves labels to forward offsets (classic BPF only jumps forward, at most 255 instructions). */
function assemble(steps: readonly Step[]): Instruction[] {
  const positions = new Map<string, number>();
  let pc = 0;
  for (const step of steps) {
    if (step.op === "label") positions.set(step.name, pc);
    else pc++;
  }
  const program: Instruction[] = [];
  const offsetTo = (label: string | undefined, from: number): number => {
    if (label === undefined) return 0;
    const target = positions.get(label);
    if (target === undefined) throw new Error(`seccomp: unknown label ${label}`);
    const offset = target - from - 1;
    if (offset < 0 || offset > 255) throw new Error(`seccomp: jump to ${label} out of range (${offset})`);
    return offset;
  };
  for (const step of steps) {
    const at = program.length;
    if (step.op === "load") program.push({ code: BPF_LD_W_ABS, jt: 0, jf: 0, k: step.offset });
    else if (step.op === "jump")
      program.push({ code: step.code, jt: offsetTo(step.ifTrue, at), jf: offsetTo(step.ifFalse, at), k: step.k });
    else if (step.op === "return") program.push({ code: BPF_RET_K, jt: 0, jf: 0, k: step.value });
  }
  return program;
}

/** The filter's instructions for x86_64 (see the file comment for what it decides). */
export function sandboxSeccompInstructions(): Instruction[] {
  const denied = Object.values(DENIED_SYSCALLS_X86_64).map((d) => d.nr);
  const steps: Step[] = [
    { op: "load", offset: OFFSET_ARCH },
    { op: "jump", code: BPF_JMP_JEQ_K, k: AUDIT_ARCH_X86_64, ifTrue: "native", ifFalse: "kill" },
    { op: "label", name: "native" },
    { op: "load", offset: OFFSET_NR },
    { op: "jump", code: BPF_JMP_JGE_K, k: X32_SYSCALL_BIT, ifTrue: "kill" },
    ...denied.map((nr): Step => ({ op: "jump", code: BPF_JMP_JEQ_K, k: nr, ifTrue: "eperm" })),
    { op: "jump", code: BPF_JMP_JEQ_K, k: CLONE_NR, ifTrue: "clone" },
    { op: "jump", code: BPF_JMP_JEQ_K, k: CLONE3_NR, ifTrue: "enosys" },
    { op: "jump", code: BPF_JMP_JEQ_K, k: PERSONALITY_NR, ifTrue: "personality" },
    { op: "return", value: SECCOMP_RET_ALLOW },
    // clone(flags, …): the kernel reads only the low 32 bits of flags.
    { op: "label", name: "clone" },
    { op: "load", offset: OFFSET_ARG0_LOW },
    { op: "jump", code: BPF_JMP_JSET_K, k: CLONE_NAMESPACE_FLAGS, ifTrue: "eperm", ifFalse: "allow" },
    // personality(unsigned int persona).
    { op: "label", name: "personality" },
    { op: "load", offset: OFFSET_ARG0_LOW },
    ...ALLOWED_PERSONALITIES.map((p): Step => ({ op: "jump", code: BPF_JMP_JEQ_K, k: p, ifTrue: "allow" })),
    { op: "return", value: SECCOMP_RET_ERRNO | EPERM },
    { op: "label", name: "allow" },
    { op: "return", value: SECCOMP_RET_ALLOW },
    { op: "label", name: "eperm" },
    { op: "return", value: SECCOMP_RET_ERRNO | EPERM },
    { op: "label", name: "enosys" },
    { op: "return", value: SECCOMP_RET_ERRNO | ENOSYS },
    { op: "label", name: "kill" },
    { op: "return", value: SECCOMP_RET_KILL_PROCESS },
  ];
  return assemble(steps);
}

/** The program as bubblewrap reads it from its `--seccomp` descriptor: struct sock_filter[], native (little) endian. */
export function encodeSeccompProgram(program: readonly Instruction[]): Buffer {
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach((instruction, i) => {
    bytes.writeUInt16LE(instruction.code, i * 8);
    bytes.writeUInt8(instruction.jt, i * 8 + 2);
    bytes.writeUInt8(instruction.jf, i * 8 + 3);
    bytes.writeUInt32LE(instruction.k >>> 0, i * 8 + 4);
  });
  return bytes;
}

/** The compiled filter for this host, or a thrown Error naming the architecture kiln has no filter for. */
export function sandboxSeccompProgram(arch: string = process.arch): {
  bytes: Buffer;
  instructions: number;
  denied: number;
} {
  if (arch !== "x64")
    throw new Error(
      `no seccomp filter is defined for the ${arch} architecture; the sandbox refuses to run jobs unfiltered`,
    );
  const program = sandboxSeccompInstructions();
  return {
    bytes: encodeSeccompProgram(program),
    instructions: program.length,
    denied: Object.keys(DENIED_SYSCALLS_X86_64).length,
  };
}

/** What the kernel's seccomp_data holds for one call, for `evaluateSeccomp`. */
export interface SeccompCall {
  readonly nr: number;
  readonly arch?: number;
  /** args[0] (only its low 32 bits are read). */
  readonly arg0?: number;
}

/**
 * Runs the program the way the kernel does, on one call: the tests check every decision
 * without loading it (and the real sandbox tests check that the kernel agrees).
 */
export function evaluateSeccomp(program: readonly Instruction[], call: SeccompCall): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(call.nr, OFFSET_NR);
  data.writeUInt32LE(call.arch ?? AUDIT_ARCH_X86_64, OFFSET_ARCH);
  data.writeUInt32LE((call.arg0 ?? 0) >>> 0, OFFSET_ARG0_LOW);
  let accumulator = 0;
  for (let pc = 0; pc < program.length; pc++) {
    const { code, jt, jf, k } = program[pc] as Instruction;
    if (code === BPF_LD_W_ABS) accumulator = data.readUInt32LE(k);
    else if (code === BPF_RET_K) return k >>> 0;
    else {
      const taken =
        code === BPF_JMP_JEQ_K
          ? accumulator === k >>> 0
          : code === BPF_JMP_JGE_K
            ? accumulator >= k >>> 0
            : code === BPF_JMP_JSET_K
              ? (accumulator & k) !== 0
              : (() => {
                  throw new Error(`seccomp: unknown opcode ${code}`);
                })();
      pc += taken ? jt : jf;
    }
  }
  throw new Error("seccomp: the program fell off its end");
}
