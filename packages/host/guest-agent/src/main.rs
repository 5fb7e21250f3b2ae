//! kiln's guest agent: pid 1 of a microVM (packages/host/src/executor/microvm/).
//!
//! It loads the virtio modules the guest kernel has as modules, says `hello` on the
//! `kiln.control` port, reads one request from the host, mounts the attempt's disks under a
//! fresh root, says `ready`, runs the command there as an unprivileged user with exactly the
//! environment it was given — its stdout and stderr one ordered channel to the `kiln.output`
//! port, its processes in a cgroup and a pid namespace of their own (under a small init, this
//! same binary run as `--job-init`, which reaps orphans as bubblewrap's does in the sandbox) —
//! reports how it ended, releases the writable disks and powers the machine off once the host
//! has all of the command's output.
//!
//! The command's stdout and stderr are one ordered channel, as in the sandbox
//! (packages/host/src/executor/sandbox/ordered-output.ts): descriptors 1 and 2 are two Unix
//! datagram sockets connected to one receiving socket, so every write(2) is one datagram on one
//! FIFO queue, in the order the writes happened, and the sender's address says the stream. The
//! agent forwards each as a frame on the `kiln.output` port — one byte for the stream (1 stdout,
//! 2 stderr), four for the length (big-endian), the bytes — and, once the command and everything
//! it started are gone, an empty frame of stream 0: the end (a datagram the agent sends itself
//! from a third socket, queued behind every write of the command).
//!
//! The control port carries, guest to host, lines:
//!   `hello`                                  the agent is up and reads its request
//!   `ready`                                  the disks are mounted; the command starts now
//!   `counters <ooms> <pids>`                 answer to `c`: the guest's OOM kills and the forks
//!                                            the command's cgroup refused, so far
//!   `exit <code|-> <signal|-> <ooms> <pids>` the command ended (the same counters, final); the
//!                                            disks are released
//!   `error <text>`                           the request could not be run
//!   `probed <kernel release>`                answer to a probe request (no disks, no command)
//! and, host to guest, the request — a little-endian u32 length, then NUL-terminated key and
//! value strings in turn (keys may repeat: `argv`, `env`, `bind`) — then single bytes: `c` asks
//! for the counters (the host asks before it kills a VM at the ceiling or on a cancel, which
//! never sends `exit`), `k` says the host has the output's end frame and the `exit` line: the
//! agent powers off only then, so no byte still queued in QEMU is lost with the VM.
//!
//! Only std and the C library (declared below): no crate to fetch or vendor.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::raw::{c_char, c_int, c_long, c_ulong, c_void};
use std::os::unix::fs::symlink;
use std::os::unix::io::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

extern "C" {
    fn mount(src: *const c_char, target: *const c_char, fstype: *const c_char, flags: c_ulong, data: *const c_void) -> c_int;
    fn umount2(target: *const c_char, flags: c_int) -> c_int;
    fn reboot(cmd: c_int) -> c_int;
    fn sync();
    fn syscall(number: c_long, ...) -> c_long;
    fn chroot(path: *const c_char) -> c_int;
    fn chdir(path: *const c_char) -> c_int;
    fn setgroups(size: usize, list: *const u32) -> c_int;
    fn setresgid(r: u32, e: u32, s: u32) -> c_int;
    fn setresuid(r: u32, e: u32, s: u32) -> c_int;
    fn setsid() -> c_int;
    fn getpid() -> c_int;
    fn prctl(option: c_int, arg2: c_ulong, arg3: c_ulong, arg4: c_ulong, arg5: c_ulong) -> c_int;
    fn sethostname(name: *const c_char, len: usize) -> c_int;
    fn clock_settime(clock: c_int, tp: *const Timespec) -> c_int;
    fn socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int;
    fn ioctl(fd: c_int, request: c_ulong, ...) -> c_int;
    fn open(path: *const c_char, flags: c_int, ...) -> c_int;
    fn write(fd: c_int, buffer: *const u8, count: usize) -> isize;
    fn close(fd: c_int) -> c_int;
    fn umask(mask: u32) -> u32;
    fn unshare(flags: c_int) -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(status: c_int) -> !;
    fn setsockopt(fd: c_int, level: c_int, name: c_int, value: *const c_void, length: u32) -> c_int;
}

const CLONE_NEWPID: c_int = 0x2000_0000;
/// Where the job's init leaves the command's status for the agent (outside the command's root).
const JOB_STATUS: &str = "/run/job-status";

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

const MS_RDONLY: c_ulong = 1;
const MS_NOSUID: c_ulong = 2;
const MS_NODEV: c_ulong = 4;
const MS_NOEXEC: c_ulong = 8;
const MS_REMOUNT: c_ulong = 32;
const MS_NOATIME: c_ulong = 1024;
const MS_BIND: c_ulong = 4096;
const MS_REC: c_ulong = 16384;
const MNT_DETACH: c_int = 2;
const SYS_FINIT_MODULE: c_long = 313;
const RB_POWER_OFF: c_int = 0x4321fedc;
const PR_SET_NO_NEW_PRIVS: c_int = 38;
const CLOCK_REALTIME: c_int = 0;
const O_WRONLY: c_int = 1;
const EEXIST: i32 = 17;
const SOL_SOCKET: c_int = 1;
const SO_SNDBUFFORCE: c_int = 32;

/// Where the output channel's sockets are bound: outside the command's root, so nothing of it reaches them by path.
const OUTPUT_DIRECTORY: &str = "/run/kiln-output";
/// The largest single write(2) the channel takes whole: the senders' buffers (as the sandbox's relay).
const MAX_WRITE_BYTES: usize = 8 << 20;
/// Frames are written to the port in batches of about this much (a port write is a virtqueue kick).
const OUTPUT_BATCH_BYTES: usize = 64 << 10;
/// The frame stream that ends the output (no bytes); 1 and 2 are stdout and stderr.
const STREAM_END: u8 = 0;

/// The most bytes of a request the agent reads (argv and environment included).
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// How long the agent waits for a device the kernel probes asynchronously.
const DEVICE_WAIT: Duration = Duration::from_secs(60);

/// Entries of the root image the command's root does not show (the agent gives its own, or none).
const HIDDEN_ROOT_ENTRIES: [&str; 14] =
    ["proc", "sys", "dev", "tmp", "run", "etc", "root", "home", "mnt", "media", "srv", "opt", "boot", "kiln"];

fn cstr(text: &str) -> CString {
    CString::new(text.replace('\0', "")).expect("no NUL left")
}

fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn do_mount(source: &str, target: &str, fstype: &str, flags: c_ulong, data: &str) -> Result<(), String> {
    let (s, t, f, d) = (cstr(source), cstr(target), cstr(fstype), cstr(data));
    let data = if data.is_empty() { std::ptr::null() } else { d.as_ptr() as *const c_void };
    let fstype_ptr = if fstype.is_empty() { std::ptr::null() } else { f.as_ptr() };
    if unsafe { mount(s.as_ptr(), t.as_ptr(), fstype_ptr, flags, data) } != 0 {
        return Err(os_error(&format!("mount {source} on {target} ({fstype})")));
    }
    Ok(())
}

fn bind(source: &str, target: &str, read_only: bool) -> Result<(), String> {
    do_mount(source, target, "", MS_BIND | MS_REC, "")?;
    if read_only {
        do_mount("none", target, "", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, "")?;
    }
    Ok(())
}

fn mkdirs(path: &str) -> Result<(), String> {
    fs::create_dir_all(path).map_err(|e| format!("mkdir {path}: {e}"))
}

fn write_file(path: &str, text: &str) -> Result<(), String> {
    fs::write(path, text).map_err(|e| format!("writing {path}: {e}"))
}

/// The request: key/value pairs, some keys repeated.
struct Request {
    pairs: Vec<(String, String)>,
}

impl Request {
    fn one(&self, key: &str) -> Result<&str, String> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).ok_or(format!("the request names no {key}"))
    }
    fn all(&self, key: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
    }
    fn number(&self, key: &str) -> Result<u64, String> {
        self.one(key)?.parse().map_err(|_| format!("{key} is not a number"))
    }
}

fn load_modules() -> Result<(), String> {
    let order = fs::read_to_string("/lib/modules/order").map_err(|e| format!("module list: {e}"))?;
    for name in order.lines().filter(|l| !l.is_empty()) {
        let path = format!("/lib/modules/{name}");
        let file = File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        let no_parameters = cstr("");
        let result = unsafe { syscall(SYS_FINIT_MODULE, file.as_raw_fd() as c_long, no_parameters.as_ptr(), 0 as c_long) };
        if result != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(EEXIST) {
                return Err(format!("loading {name}: {error}"));
            }
        }
    }
    Ok(())
}

/// Waits (bounded) until `find` finds what the kernel probes asynchronously.
fn wait_for<T>(what: &str, mut find: impl FnMut() -> Option<T>) -> Result<T, String> {
    let deadline = Instant::now() + DEVICE_WAIT;
    loop {
        if let Some(found) = find() {
            return Ok(found);
        }
        if Instant::now() > deadline {
            return Err(format!("{what} did not appear within {} s", DEVICE_WAIT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The device of the virtio-serial port QEMU named `name`.
fn port_named(name: &str) -> Option<String> {
    for entry in fs::read_dir("/sys/class/virtio-ports").ok()?.flatten() {
        if fs::read_to_string(entry.path().join("name")).map(|n| n.trim() == name).unwrap_or(false) {
            let device = format!("/dev/{}", entry.file_name().to_string_lossy());
            if Path::new(&device).exists() {
                return Some(device);
            }
        }
    }
    None
}

/// The virtio-blk disk QEMU gave the serial `serial` (the host names each disk so; probe order is no promise).
fn disk_with_serial(serial: &str) -> Option<String> {
    for entry in fs::read_dir("/sys/block").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with("vd") {
            continue;
        }
        if fs::read_to_string(entry.path().join("serial")).map(|s| s.trim() == serial).unwrap_or(false) {
            let device = format!("/dev/{name}");
            if Path::new(&device).exists() {
                return Some(device);
            }
        }
    }
    None
}

fn read_request(input: &mut impl Read) -> Result<Request, String> {
    parse_request(&read_raw_request(input)?)
}

/// The request as the host sent it: the length, then the fields.
fn read_raw_request(input: &mut impl Read) -> Result<Vec<u8>, String> {
    let mut length = [0u8; 4];
    input.read_exact(&mut length).map_err(|e| format!("reading the request's length: {e}"))?;
    let size = u32::from_le_bytes(length) as usize;
    if size > MAX_REQUEST_BYTES {
        return Err(format!("the request is {size} bytes, more than {MAX_REQUEST_BYTES}"));
    }
    let mut bytes = vec![0u8; 4 + size];
    bytes[..4].copy_from_slice(&length);
    input.read_exact(&mut bytes[4..]).map_err(|e| format!("reading the request: {e}"))?;
    Ok(bytes)
}

fn parse_request(raw: &[u8]) -> Result<Request, String> {
    let bytes = &raw[4..];
    let mut fields: Vec<String> =
        bytes.split(|b| *b == 0).map(|f| String::from_utf8_lossy(f).into_owned()).collect();
    // Every field ends in a NUL, which leaves one empty field after the last.
    fields.pop();
    if fields.len() % 2 != 0 {
        return Err("the request's fields do not pair up".into());
    }
    Ok(Request { pairs: fields.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect() })
}

/// Brings the loopback interface up: the command has loopback and nothing else (the VM has no network device).
fn loopback_up() -> Result<(), String> {
    const SIOCGIFFLAGS: c_ulong = 0x8913;
    const SIOCSIFFLAGS: c_ulong = 0x8914;
    const IFF_UP: u16 = 0x1;
    const IFF_RUNNING: u16 = 0x40;
    // struct ifreq: 16 bytes of interface name, then a 24-byte union whose first member here is the flags.
    let mut ifreq = [0u8; 40];
    ifreq[..2].copy_from_slice(b"lo");
    let fd = unsafe { socket(2, 2, 0) };
    if fd < 0 {
        return Err(os_error("socket"));
    }
    let result = unsafe {
        if ioctl(fd, SIOCGIFFLAGS, ifreq.as_mut_ptr()) != 0 {
            -1
        } else {
            let flags = u16::from_ne_bytes([ifreq[16], ifreq[17]]) | IFF_UP | IFF_RUNNING;
            ifreq[16..18].copy_from_slice(&flags.to_ne_bytes());
            ioctl(fd, SIOCSIFFLAGS, ifreq.as_mut_ptr())
        }
    };
    let error = os_error("bringing lo up");
    unsafe { close(fd) };
    if result != 0 {
        return Err(error);
    }
    Ok(())
}

/// Mounts the attempt's disks under /job, the command's root.
fn prepare(request: &Request) -> Result<(), String> {
    let uid = request.number("uid")? as u32;
    let gid = request.number("gid")? as u32;
    let memory = request.number("memory")?;
    // The host's clock when it sent the request: the files it wrote are older, what cargo writes newer.
    let now_ns: u128 = request.one("now")?.parse().map_err(|_| "now is not a number")?;
    let time = Timespec { sec: (now_ns / 1_000_000_000) as i64, nsec: (now_ns % 1_000_000_000) as i64 };
    if unsafe { clock_settime(CLOCK_REALTIME, &time) } != 0 {
        return Err(os_error("setting the clock"));
    }
    let hostname = request.one("hostname")?;
    let name = cstr(hostname);
    if unsafe { sethostname(name.as_ptr(), hostname.len()) } != 0 {
        return Err(os_error("setting the host name"));
    }
    loopback_up()?;
    // Memory is committed when it is touched, as on a host whose memory far exceeds a job's: an
    // allocation beyond the VM's memory then meets the OOM killer (reported as such), not a
    // refusal at malloc that the job would report as its own abort.
    write_file("/proc/sys/vm/overcommit_memory", "1")?;

    let disk = |serial: &str| wait_for(&format!("disk {serial}"), || disk_with_serial(serial));
    mkdirs("/mnt/root")?;
    do_mount(&disk("kiln-root")?, "/mnt/root", "erofs", MS_RDONLY | MS_NODEV, "")?;

    // The command's root: a tmpfs holding the system's top-level entries (read-only binds, or the
    // same symlinks) and the mount points, made read-only once everything is mounted.
    mkdirs("/job")?;
    do_mount("kiln-root", "/job", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")?;
    for entry in fs::read_dir("/mnt/root").map_err(|e| format!("/mnt/root: {e}"))?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if HIDDEN_ROOT_ENTRIES.contains(&name.as_str()) {
            continue;
        }
        let (source, target) = (format!("/mnt/root/{name}"), format!("/job/{name}"));
        let kind = entry.file_type().map_err(|e| format!("{source}: {e}"))?;
        if kind.is_symlink() {
            let link = fs::read_link(&source).map_err(|e| format!("{source}: {e}"))?;
            symlink(link, &target).map_err(|e| format!("{target}: {e}"))?;
        } else if kind.is_dir() {
            mkdirs(&target)?;
            bind(&source, &target, true)?;
        }
    }
    // /etc: the image's, with the identity files replaced (no user of the image runs anything).
    let home = request.one("home")?;
    mkdirs("/run/etc")?;
    write_file(
        "/run/etc/passwd",
        &format!("kiln:x:{uid}:{gid}:kiln job:{home}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
    )?;
    write_file("/run/etc/group", &format!("kiln:x:{gid}:\nnogroup:x:65534:\n"))?;
    write_file("/run/etc/hosts", &format!("127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost\n"))?;
    mkdirs("/job/etc")?;
    bind("/mnt/root/etc", "/job/etc", true)?;
    for file in ["passwd", "group", "hosts"] {
        bind(&format!("/run/etc/{file}"), &format!("/job/etc/{file}"), true)?;
    }
    // /job/proc is mounted by the job's init, inside the command's own pid namespace.
    mkdirs("/job/proc")?;
    mkdirs("/job/dev")?;
    do_mount("devtmpfs", "/job/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "")?;
    mkdirs("/job/tmp")?;
    do_mount("tmp", "/job/tmp", "tmpfs", MS_NOSUID | MS_NODEV, &format!("mode=1777,size={memory}"))?;

    let toolchain = format!("/job{}", request.one("toolchain")?);
    mkdirs(&toolchain)?;
    do_mount(&disk("kiln-toolchain")?, &toolchain, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID, "")?;

    let workspace = format!("/job{}", request.one("workspace")?);
    mkdirs(&workspace)?;
    do_mount(&disk("kiln-workspace")?, &workspace, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "")?;

    // The target disk's file system holds the target dir as `target`, as in the sandbox.
    mkdirs("/mnt/target")?;
    do_mount(&disk("kiln-target")?, "/mnt/target", "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "noinit_itable")?;
    if !Path::new("/mnt/target/target").exists() {
        mkdirs("/mnt/target/target")?;
        std::os::unix::fs::chown("/mnt/target/target", Some(uid), Some(gid)).map_err(|e| format!("chown target: {e}"))?;
    }
    let target = format!("/job{}", request.one("target")?);
    mkdirs(&target)?;
    bind("/mnt/target/target", &target, false)?;

    let home = format!("/job{home}");
    mkdirs(&home)?;
    let home_options = format!("mode=0700,uid={uid},gid={gid},size={memory}");
    do_mount("home", &home, "tmpfs", MS_NOSUID | MS_NODEV, &home_options)?;

    for (index, path) in request.all("bind").iter().enumerate() {
        let target = format!("/job{path}");
        mkdirs(&target)?;
        do_mount(&disk(&format!("kiln-ro-{index}"))?, &target, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID, "")?;
    }
    do_mount("none", "/job", "", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755,size=4m")?;

    // The command's cgroup: its process count limited, its processes killed as one afterwards.
    mkdirs("/sys/fs/cgroup")?;
    do_mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, "")?;
    write_file("/sys/fs/cgroup/cgroup.subtree_control", "+pids +memory")?;
    mkdirs("/sys/fs/cgroup/job")?;
    write_file("/sys/fs/cgroup/job/pids.max", &request.number("pids")?.to_string())?;
    Ok(())
}

/// `key value` lines (/proc/vmstat, pids.events) → the value of `key`, 0 when absent.
fn counter(path: &str, key: &str) -> u64 {
    fs::read_to_string(path)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some(key)).then(|| words.next().and_then(|v| v.parse().ok())).flatten()
            })
        })
        .unwrap_or(0)
}

/// The pid as decimal digits, made without allocating (it runs between fork and exec).
fn decimal(mut value: u32, digits: &mut [u8; 12]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &digits[at..];
        }
    }
}

/// The output channel's sockets: the one receiving queue, the command's stdout and stderr, and the agent's end marker.
struct OutputChannel {
    queue: UnixDatagram,
    stdout: UnixDatagram,
    stderr: UnixDatagram,
    end: UnixDatagram,
}

fn output_channel() -> Result<OutputChannel, String> {
    mkdirs(OUTPUT_DIRECTORY)?;
    let path = |name: &str| format!("{OUTPUT_DIRECTORY}/{name}");
    let queue = UnixDatagram::bind(path("queue")).map_err(|e| format!("the output queue: {e}"))?;
    let sender = |name: &str| -> Result<UnixDatagram, String> {
        let socket = UnixDatagram::bind(path(name)).map_err(|e| format!("output socket {name}: {e}"))?;
        // The send buffer bounds one datagram: forced up so a large write(2) is taken whole.
        let size = MAX_WRITE_BYTES as c_int;
        let size_ptr = &size as *const c_int as *const c_void;
        if unsafe { setsockopt(socket.as_raw_fd(), SOL_SOCKET, SO_SNDBUFFORCE, size_ptr, 4) } != 0 {
            return Err(os_error(&format!("the send buffer of output socket {name}")));
        }
        socket.connect(path("queue")).map_err(|e| format!("connecting output socket {name}: {e}"))?;
        Ok(socket)
    };
    Ok(OutputChannel { queue, stdout: sender("1")?, stderr: sender("2")?, end: sender("end")? })
}

/// The stream a datagram's sender stands for: 1 stdout, 2 stderr, STREAM_END the agent's end; None for anyone else.
fn stream_of(sender: &std::os::unix::net::SocketAddr) -> Option<u8> {
    match sender.as_pathname()?.file_name()?.to_str()? {
        "1" => Some(1),
        "2" => Some(2),
        "end" => Some(STREAM_END),
        _ => None,
    }
}

/// Forwards the queue's datagrams to the output port as frames, in queue order, until the end
/// marker; what is queued is batched into one port write. A port that fails is reported after the
/// end (the queue is still drained, so no writer stays blocked on it).
fn relay_output(queue: &UnixDatagram, port: &mut File) -> Result<(), String> {
    let mut datagram = vec![0u8; MAX_WRITE_BYTES];
    let mut frames: Vec<u8> = Vec::with_capacity(OUTPUT_BATCH_BYTES * 2);
    let mut failure: Option<String> = None;
    let mut flush = |frames: &mut Vec<u8>, failure: &mut Option<String>| {
        if failure.is_none() {
            if let Err(error) = port.write_all(frames) {
                *failure = Some(format!("writing the output port: {error}"));
            }
        }
        frames.clear();
    };
    let mut blocking = true;
    loop {
        let received = queue.recv_from(&mut datagram);
        let (length, sender) = match received {
            Ok(received) => received,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                // Nothing more queued now: what was gathered goes, then wait for the next write.
                flush(&mut frames, &mut failure);
                queue.set_nonblocking(false).map_err(|e| format!("the output queue: {e}"))?;
                blocking = true;
                continue;
            }
            Err(error) => return Err(format!("reading the output queue: {error}")),
        };
        match stream_of(&sender) {
            Some(STREAM_END) => {
                frames.extend_from_slice(&[STREAM_END, 0, 0, 0, 0]);
                flush(&mut frames, &mut failure);
                return failure.map_or(Ok(()), Err);
            }
            Some(stream) if length > 0 => {
                frames.push(stream);
                frames.extend_from_slice(&(length as u32).to_be_bytes());
                frames.extend_from_slice(&datagram[..length]);
            }
            _ => {}
        }
        if frames.len() >= OUTPUT_BATCH_BYTES {
            flush(&mut frames, &mut failure);
        }
        if blocking {
            // Take whatever else is queued without waiting, then write it as one batch.
            queue.set_nonblocking(true).map_err(|e| format!("the output queue: {e}"))?;
            blocking = false;
        }
    }
}

/// The guest's OOM kills since `oom_before` and the forks the command's cgroup refused, as the host reads them.
fn counters(oom_before: u64) -> String {
    let ooms = counter("/proc/vmstat", "oom_kill").saturating_sub(oom_before);
    let refused = counter("/sys/fs/cgroup/job/pids.events", "max");
    format!("{ooms} {refused}")
}

/// Answers the host's single bytes on the control port while the command runs: `c` with the
/// counters, `k` by letting the agent power off (sent on `acknowledged`).
fn serve_control(mut input: File, mut output: File, oom_before: u64, acknowledged: mpsc::Sender<()>) {
    let mut byte = [0u8; 1];
    while let Ok(1) = input.read(&mut byte) {
        match byte[0] {
            // One write per line: lines from two threads never interleave.
            b'c' => {
                let _ = output.write_all(format!("counters {}\n", counters(oom_before)).as_bytes());
            }
            b'k' => {
                let _ = acknowledged.send(());
            }
            _ => {}
        }
    }
}

/// Runs the command (under its init, in a pid namespace of its own) and returns the status line
/// the host reads, and where the host's acknowledgement of the output arrives.
fn run(request: &Request, raw: &[u8], control: &mut File) -> Result<(String, mpsc::Receiver<()>), String> {
    let device = wait_for("port kiln.output", || port_named("kiln.output"))?;
    let mut port = OpenOptions::new().write(true).open(&device).map_err(|e| format!("{device}: {e}"))?;
    let channel = output_channel()?;
    request.all("argv").first().ok_or("argv is empty")?;
    let oom_before = counter("/proc/vmstat", "oom_kill");
    // The agent's threads start before the pid namespace below: a thread cannot be made after it.
    let (acknowledge, acknowledged) = mpsc::channel();
    let (input, output) = (
        control.try_clone().map_err(|e| format!("the control port: {e}"))?,
        control.try_clone().map_err(|e| format!("the control port: {e}"))?,
    );
    std::thread::spawn(move || serve_control(input, output, oom_before, acknowledge));
    let queue = channel.queue;
    let relay = std::thread::spawn(move || relay_output(&queue, &mut port));
    // The next child is pid 1 of a new pid namespace: the command and its descendants see only themselves.
    if unsafe { unshare(CLONE_NEWPID) } != 0 {
        return Err(os_error("a pid namespace for the command"));
    }
    let procs = cstr("/sys/fs/cgroup/job/cgroup.procs");
    let mut init = Command::new("/init");
    init.arg("--job-init")
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::from(OwnedFd::from(channel.stdout)))
        .stderr(Stdio::from(OwnedFd::from(channel.stderr)));
    unsafe {
        // Into the command's cgroup before anything of it runs.
        init.pre_exec(move || join_cgroup(&procs));
    }
    let _ = control.write_all(b"ready\n");
    let spawned = init.spawn();
    // The command's descriptors are its own now: the agent's copies go, so only the command writes.
    drop(init);
    let ended = (|| -> Result<(), String> {
        let mut child = spawned.map_err(|e| format!("starting the command's init: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(raw).map_err(|e| format!("handing the request to the command's init: {e}"))?;
        }
        child.wait().map_err(|e| format!("waiting for the command's init: {e}"))?;
        Ok(())
    })();
    // Whatever the command left running goes before the end is queued (its init's exit took the
    // pid namespace with it; the cgroup is the backstop): every write of the command is then
    // ahead of the end marker in the queue.
    let _ = fs::write("/sys/fs/cgroup/job/cgroup.kill", "1");
    let _ = wait_for("an empty job cgroup", || {
        fs::read_to_string("/sys/fs/cgroup/job/cgroup.procs").ok().filter(|t| t.trim().is_empty())
    });
    channel.end.send(b"").map_err(|e| format!("queueing the output's end: {e}"))?;
    relay.join().map_err(|_| "the output relay panicked".to_string())??;
    ended?;
    let status = fs::read_to_string(JOB_STATUS).map_err(|e| format!("the command's init left no status: {e}"))?;
    if let Some(error) = status.strip_prefix("error ") {
        return Err(error.trim().to_string());
    }
    Ok((format!("exit {} {}\n", status.trim(), counters(oom_before)), acknowledged))
}

/// Writes the calling process's pid into a cgroup.procs file, without allocating (it runs between fork and exec).
fn join_cgroup(procs: &CString) -> std::io::Result<()> {
    let mut digits = [0u8; 12];
    let pid = decimal(unsafe { getpid() } as u32, &mut digits);
    let fd = unsafe { open(procs.as_ptr(), O_WRONLY) };
    if fd < 0 || unsafe { write(fd, pid.as_ptr(), pid.len()) } != pid.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    unsafe { close(fd) };
    Ok(())
}

/// The command's init: pid 1 of its pid namespace, root, not in the command's root. It mounts the
/// namespace's /proc under the command's root, starts the command there as the unprivileged user,
/// reaps every process that ends (orphans reparent to it), and when the command has ended leaves
/// `<code|-> <signal|->` for the agent and exits, which ends every process left in the namespace.
fn job_init() -> ! {
    let outcome = (|| -> Result<String, String> {
        let request = read_request(&mut std::io::stdin())?;
        do_mount("proc", "/job/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "")?;
        let uid = request.number("uid")? as u32;
        let gid = request.number("gid")? as u32;
        let argv = request.all("argv");
        let program = *argv.first().ok_or("argv is empty")?;
        let cwd = cstr(request.one("cwd")?);
        let mut command = Command::new(program);
        command.args(&argv[1..]).env_clear().stdin(Stdio::null());
        for pair in request.all("env") {
            if let Some((name, value)) = pair.split_once('=') {
                command.env(name, value);
            }
        }
        let root = cstr("/job");
        // Between fork and exec: the command's root and working directory, a session of its own,
        // then the unprivileged user with no way back. std would drop the user before running
        // this, when chroot is no longer allowed, so it is done here.
        unsafe {
            command.pre_exec(move || {
                if chroot(root.as_ptr()) != 0 || chdir(cwd.as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                setsid();
                umask(0o022);
                if setgroups(0, std::ptr::null()) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|e| format!("starting {program}: {e}"))?;
        let command_pid = child.id() as c_int;
        loop {
            let mut status: c_int = 0;
            let pid = unsafe { waitpid(-1, &mut status, 0) };
            if pid < 0 {
                return Err(os_error("waiting for the command"));
            }
            if pid == command_pid {
                let exited = status & 0x7f == 0;
                let code = if exited { ((status >> 8) & 0xff).to_string() } else { "-".into() };
                let signal = if exited { "-".into() } else { (status & 0x7f).to_string() };
                return Ok(format!("{code} {signal}"));
            }
        }
    })();
    let line = match outcome {
        Ok(status) => status,
        Err(error) => format!("error {}", error.replace('\n', " ")),
    };
    let _ = fs::write(JOB_STATUS, format!("{line}\n"));
    unsafe { _exit(0) }
}

/// The writable disks unmounted, so their superblocks (free counts) are on disk before power-off.
fn release_disks(request: &Request) {
    let mounts = [
        request.one("target").ok().map(|t| format!("/job{t}")),
        Some("/mnt/target".to_string()),
        request.one("workspace").ok().map(|w| format!("/job{w}")),
    ];
    for path in mounts.into_iter().flatten() {
        let target = cstr(&path);
        if unsafe { umount2(target.as_ptr(), 0) } != 0 {
            unsafe { umount2(target.as_ptr(), MNT_DETACH) };
        }
    }
    unsafe { sync() };
}

fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease").map(|r| r.trim().to_string()).unwrap_or_default()
}

/// Everything up to the status line; the control port, once open, is where it goes.
fn serve() -> Result<(), String> {
    load_modules()?;
    let device = wait_for("port kiln.control", || port_named("kiln.control"))?;
    let mut control = OpenOptions::new().read(true).write(true).open(&device).map_err(|e| format!("{device}: {e}"))?;
    control.write_all(b"hello\n").map_err(|e| format!("{device}: {e}"))?;
    let line = match read_raw_request(&mut control).and_then(|raw| parse_request(&raw).map(|r| (raw, r))) {
        Err(error) => format!("error {error}\n"),
        Ok((_, request)) if request.one("probe").is_ok() => format!("probed {}\n", kernel_release()),
        Ok((raw, request)) => {
            let outcome = prepare(&request).and_then(|()| run(&request, &raw, &mut control));
            release_disks(&request);
            match outcome {
                Ok((line, acknowledged)) => {
                    control.write_all(line.as_bytes()).map_err(|e| format!("{device}: {e}"))?;
                    // Power off only once the host has everything (it kills a VM that waits too long).
                    let _ = acknowledged.recv();
                    return Ok(());
                }
                Err(error) => format!("error {}\n", error.replace('\n', " ")),
            }
        }
    };
    control.write_all(line.as_bytes()).map_err(|e| format!("{device}: {e}"))?;
    Ok(())
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--job-init") {
        job_init();
    }
    let _ = do_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "");
    let _ = do_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "");
    let _ = do_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "");
    if let Err(error) = serve() {
        // No control port to report on: the serial console is the host's diagnostics.
        eprintln!("kiln guest agent: {error}");
    }
    unsafe { sync() };
    unsafe { reboot(RB_POWER_OFF) };
}
