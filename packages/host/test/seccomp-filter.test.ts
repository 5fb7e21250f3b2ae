import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import {
  ALLOWED_PERSONALITIES,
  AUDIT_ARCH_X86_64,
  CLONE_NAMESPACE_FLAGS,
  DENIED_SYSCALLS_X86_64,
  encodeSeccompProgram,
  evaluateSeccomp,
  SECCOMP_RET_ALLOW,
  SECCOMP_RET_ERRNO,
  SECCOMP_RET_KILL_PROCESS,
  sandboxSeccompInstructions,
  sandboxSeccompProgram,
} from "../src/executor/sandbox/seccomp-filter.js";

const EPERM = SECCOMP_RET_ERRNO | 1;
const ENOSYS = SECCOMP_RET_ERRNO | 38;
const HEADER = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";

describe("the sandbox's seccomp filter (x86_64)", () => {
  const program = sandboxSeccompInstructions();
  const decide = (nr: number, arg0 = 0, arch = AUDIT_ARCH_X86_64) => evaluateSeccomp(program, { nr, arg0, arch });

  it("refuses every denied system call with EPERM", () => {
    for (const [name, { nr }] of Object.entries(DENIED_SYSCALLS_X86_64))
      assert.equal(decide(nr), EPERM, `${name} (${nr})`);
  });

  it("allows the calls a build makes (read, write, openat, mmap, execve, wait4, fork, vfork, futex, epoll, memfd, statx)", () => {
    for (const nr of [0, 1, 257, 9, 59, 61, 57, 58, 202, 232, 233, 281, 319, 332, 39, 60, 231, 14, 13])
      assert.equal(decide(nr), SECCOMP_RET_ALLOW, `syscall ${nr}`);
  });

  it("clone: threads and forks pass, any namespace flag is refused; clone3 answers ENOSYS so libc falls back", () => {
    const threadFlags = 0x3d0f00; // what glibc's pthread_create passes
    assert.equal(decide(56, threadFlags), SECCOMP_RET_ALLOW);
    assert.equal(decide(56, 0x01200011), SECCOMP_RET_ALLOW, "fork()'s flags");
    for (let bit = 0; bit < 32; bit++) {
      const flag = 2 ** bit;
      if ((CLONE_NAMESPACE_FLAGS & flag) !== 0) assert.equal(decide(56, threadFlags | flag), EPERM, `flag ${flag}`);
    }
    assert.equal(decide(435), ENOSYS);
  });

  it("personality: only the values Docker admits", () => {
    for (const persona of ALLOWED_PERSONALITIES) assert.equal(decide(135, persona), SECCOMP_RET_ALLOW, `${persona}`);
    for (const persona of [0x0040000 /* ADDR_NO_RANDOMIZE */, 0x0400000 /* READ_IMPLIES_EXEC */, 0x1, 0x10])
      assert.equal(decide(135, persona), EPERM, `${persona}`);
  });

  it("kills a call of another ABI: i386 (int 0x80) and x32", () => {
    assert.equal(decide(1, 0, 0x40000003 /* AUDIT_ARCH_I386 */), SECCOMP_RET_KILL_PROCESS);
    assert.equal(decide(0x40000000 | 1), SECCOMP_RET_KILL_PROCESS);
    assert.equal(decide(0x40000000 | 101), SECCOMP_RET_KILL_PROCESS);
  });

  it("names the system calls by the numbers of the installed kernel headers", (t) => {
    if (!existsSync(HEADER)) {
      t.skip(`${HEADER} is not installed`);
      return;
    }
    const header = readFileSync(HEADER, "utf8");
    for (const [name, { nr }] of Object.entries(DENIED_SYSCALLS_X86_64)) {
      const defined = new RegExp(`^#define __NR_${name} (\\d+)$`, "m").exec(header)?.[1];
      assert.equal(Number(defined), nr, `__NR_${name}`);
    }
    for (const [name, nr] of [
      ["clone", 56],
      ["clone3", 435],
      ["personality", 135],
    ] as const)
      assert.equal(Number(new RegExp(`^#define __NR_${name} (\\d+)$`, "m").exec(header)?.[1]), nr, name);
  });

  it("encodes struct sock_filter little-endian, 8 bytes each; refuses an architecture it has no table for", () => {
    const bytes = encodeSeccompProgram(program);
    assert.equal(bytes.length, program.length * 8);
    assert.equal(bytes.readUInt16LE(0), 0x20, "the first instruction loads the arch");
    assert.equal(bytes.readUInt32LE(4), 4);
    assert.deepEqual(sandboxSeccompProgram("x64").bytes, bytes);
    assert.throws(() => sandboxSeccompProgram("arm64"), /no seccomp filter is defined for the arm64 architecture/);
  });
});
