/**
 * One order across a command's stdout and stderr: the order the kernel queued its writes.
 *
 * Two pipes cannot give it. A reader that finds both readable at once (it was busy, or the
 * writes came within one wakeup) has nothing that says which write came first, so cargo's
 * `Running unittests …` on stderr could land after the first lines its test binary wrote on
 * stdout (seen on about 2 of 15 cold runs, the records carrying one millisecond).
 *
 * So the command's descriptors 1 and 2 are two Unix datagram sockets, each bound to an address
 * of its own (the kernel's autobind) and connected to one receiving socket: every write(2) is
 * one datagram, queued on the receiver's single FIFO queue in the order the writes happened
 * (a write that returned before another began is ahead of it), and `recvfrom` names the
 * sending socket, which says the stream. The *relay* below owns the receiving socket and
 * forwards each datagram to the host agent as a frame on one pipe: one byte for the stream
 * (1 stdout, 2 stderr), four for the length (big-endian), then the bytes. `OutputFrames`
 * (shared/output-frames.ts) decodes them. The microVM's guest agent sends the same frames over
 * its output port, so `ExecutionRequest.onOutput` is called in write order whichever executor ran.
 *
 * What it costs, and what a program sees:
 * - A datagram is all or nothing: a single write(2) larger than the kernel takes in one
 *   datagram fails (EMSGSIZE past the socket's send buffer, ENOBUFS past what one allocation
 *   holds: about 4 MiB on Linux 6) where a pipe would have taken it in parts. The relay forces
 *   the send buffers to 8 MiB (SO_SNDBUFFORCE; it runs as root) so the kernel's own bound is
 *   the limit; docs/isolation.md says so. Programs write far less at once (Rust's stdout
 *   writes a line at a time; libtest writes its failures listing in one write).
 * - Each write is a datagram the relay receives and frames: a few microseconds of system time
 *   per write (docs/benchmarks.md). Like a pipe, a writer blocks while the receiver's queue is
 *   full, so a command can never outrun the agent by more than that queue.
 * - The sockets are a descriptor type of their own: fstat says socket, not FIFO.
 *
 * The relay runs outside the attempt's pid namespace, between `setpriv --pdeathsig` and
 * `unshare`: everything inside dies with the namespace's init, and the relay must still drain
 * what the last processes wrote. It knows they are gone when `unshare` has exited (a pipe
 * only `unshare` holds reaches end of file: the launcher closes every descriptor above 5), and
 * then empties the queue without waiting, since no writer is left. Written in Perl because
 * Node has no Unix datagram sockets and Debian's perl-base (Essential, on every host) has.
 */

/** How the relay is started: `perl -e OUTPUT_RELAY -- COMMAND…`; see the file comment. */
export const OUTPUT_RELAY = [
  // No module: loading Socket and POSIX (with strict and warnings) cost about 10 ms of CPU per
  // attempt, more than the relay's own work. Their constants are Linux's; the system calls they
  // wrapped are made by number (x86_64, like prctl below and the seccomp filter).
  "sub AF_UNIX () { 1 } sub SOCK_DGRAM () { 2 } sub SOL_SOCKET () { 1 } sub MSG_DONTWAIT () { 64 }",
  "sub quit { syscall(231, $_[0]); }", // exit_group(2): no END blocks, no buffers flushed twice
  "sub dup { my $fd = syscall(32, $_[0]); $fd < 0 ? undef : $fd }",
  "sub dup2 { syscall(33, $_[0], $_[1]) < 0 ? undef : $_[1] }",
  "sub fdclose { syscall(3, $_[0]) }",
  'sub fail { print STDERR "kiln output relay: $_[0]: $!\\n"; quit(125); }',
  // Descriptors 3–5 are the launcher's (bwrap's status, the job's stderr, the seccomp program):
  // held by /dev/null where the agent passed none, so no socket of the relay's is numbered there.
  "for my $fd (3, 4, 5) {",
  "  my $copy = dup($fd);",
  "  if (defined $copy) { fdclose($copy); next; }",
  '  my $devnull = "/dev/null";',
  "  my $null = syscall(2, $devnull, 0);", // open(2), read-only
  '  $null >= 0 or fail("open /dev/null");',
  '  if ($null != $fd) { dup2($null, $fd) // fail("dup2"); fdclose($null); }',
  "}",
  'socket(my $rx, AF_UNIX, SOCK_DGRAM, 0) or fail("socket");',
  // A two-byte address asks the kernel for a unique abstract one (autobind).
  'bind($rx, pack("S", AF_UNIX)) or fail("bind");',
  "my $rxaddr = getsockname($rx);",
  "my (%streamOf, @tx);",
  "for my $stream (1, 2) {",
  '  socket(my $tx, AF_UNIX, SOCK_DGRAM, 0) or fail("socket");',
  '  bind($tx, pack("S", AF_UNIX)) or fail("bind");',
  // SO_SNDBUFFORCE (32): the datagram size bound is the send buffer.
  '  setsockopt($tx, SOL_SOCKET, 32, pack("i", 8 * 1024 * 1024)) or fail("SO_SNDBUFFORCE");',
  '  connect($tx, $rxaddr) or fail("connect");',
  "  $streamOf{getsockname($tx)} = $stream;",
  "  push @tx, $tx;",
  "}",
  'pipe(my $lifeline, my $lifelineEnd) or fail("pipe");',
  "my $relay = $$;",
  "my $pid = fork();",
  'defined $pid or fail("fork");',
  "if ($pid == 0) {",
  '  dup2(fileno($tx[0]), 1) // fail("dup2");',
  '  dup2(fileno($tx[1]), 4) // fail("dup2");',
  '  dup2(fileno($lifelineEnd), 7) // fail("dup2");',
  // prctl(PR_SET_PDEATHSIG, SIGKILL) (x86_64, as the seccomp filter): dies with the relay, and
  // exits if the relay died before that took effect.
  '  syscall(157, 1, 9) == 0 or fail("prctl");',
  "  quit(125) if getppid() != $relay;",
  '  exec { $ARGV[0] } @ARGV or fail("exec $ARGV[0]");',
  "}",
  "close($_) for @tx;",
  "close($lifelineEnd);",
  "fdclose($_) for (0, 3, 4, 5);",
  "binmode STDOUT;",
  'my ($datagram, $out) = ("", "");',
  "sub flush_out {",
  "  my $at = 0;",
  "  while ($at < length($out)) {",
  "    my $wrote = syswrite(STDOUT, $out, length($out) - $at, $at);",
  '    if (!defined $wrote) { next if $!{EINTR}; fail("write"); }',
  "    $at += $wrote;",
  "  }",
  '  $out = "";',
  "}",
  "sub drain {",
  "  while (defined(my $from = recv($rx, $datagram, 8 * 1024 * 1024, MSG_DONTWAIT))) {",
  "    my $stream = $streamOf{$from} // next;",
  "    next if length($datagram) == 0;",
  '    $out .= pack("CN", $stream, length($datagram)) . $datagram;',
  "    flush_out() if length($out) >= 65536;",
  "  }",
  "  flush_out();",
  "}",
  "my $watched = '';",
  "vec($watched, fileno($rx), 1) = 1;",
  "vec($watched, fileno($lifeline), 1) = 1;",
  "while (1) {",
  "  my $ready = select(my $readable = $watched, undef, undef, undef);",
  '  if ($ready < 0) { next if $!{EINTR}; fail("select"); }',
  "  drain();",
  "  if (vec($readable, fileno($lifeline), 1)) { my $byte; last if !sysread($lifeline, $byte, 1); }",
  "}",
  "drain();",
  "waitpid($pid, 0);",
  "quit($? & 127 ? 128 + ($? & 127) : $? >> 8);",
].join("\n");
