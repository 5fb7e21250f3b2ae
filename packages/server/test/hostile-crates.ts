/**
 * Rust sources of the hostile crates in hostile-crate.sandbox.test.ts. Each escape attempt has a
 * name; `Ok` from `attempt` means the sandbox allowed it.
 */

import { readFileSync } from "node:fs";

/**
 * Host paths no job may see, one a line (the hostile crate's KILN_HOST_PATHS): the given ones
 * (work root, lineages, toolchain, …), the server's working directory, the scratch root's name
 * and the host's root block device.
 */
export function hostPathsFor(
  paths: readonly string[],
  /**
   * A microVM's own disks are virtio disks named like a virtio host's (`/dev/vda`, …): in its
   * mountinfo that name says nothing of the host, so it is no needle there.
   */
  options: { readonly rootDevice?: boolean } = {},
): string {
  if (options.rootDevice === false) return [...paths, process.cwd(), "kiln-scratch-"].join("\n");
  const rootDevice = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" "))
    .find((f) => f[4] === "/")
    ?.at(-2);
  return [...paths, process.cwd(), "kiln-scratch-", ...(rootDevice?.startsWith("/dev/") ? [rootDevice] : [])].join(
    "\n",
  );
}

/**
 * System calls the sandbox's seccomp filter refuses whose unfiltered answer to these arguments
 * is not EPERM (success, or another error: EINVAL, EFAULT, EBADF, ESRCH, …), so an EPERM shows
 * the filter, not a capability check, stopped them. (Measured here without the filter, as an
 * unprivileged user: unshare 0, setns -9, bpf -22, perf_event_open -14, userfaultfd -22, keyctl
 * -95, add_key -14, io_uring_setup -14, ptrace -3, process_vm_readv 0, name_to_handle_at -14,
 * personality 0, mount -14, open_tree -14, quotactl -19.)
 */
export const SECCOMP_PROBES = [
  { name: "unshare", nr: 272, args: [0, 0, 0, 0, 0] },
  { name: "setns", nr: 308, args: [-1, 0, 0, 0, 0] },
  { name: "bpf", nr: 321, args: [-1, 0, 0, 0, 0] },
  { name: "perf_event_open", nr: 298, args: [0, 0, -1, -1, 0] },
  { name: "userfaultfd", nr: 323, args: [-1, 0, 0, 0, 0] },
  { name: "keyctl", nr: 250, args: [-1, 0, 0, 0, 0] },
  { name: "add_key", nr: 248, args: [0, 0, 0, 0, 0] },
  { name: "io_uring_setup", nr: 425, args: [0, 0, 0, 0, 0] },
  { name: "ptrace", nr: 101, args: [-1, 0, 0, 0, 0] },
  { name: "process_vm_readv", nr: 310, args: [0, 0, 0, 0, 0] },
  { name: "name_to_handle_at", nr: 303, args: [-1, 0, 0, 0, 0] },
  { name: "personality", nr: 135, args: [0x0040000, 0, 0, 0, 0] },
  { name: "mount", nr: 165, args: [0, 0, 0, 0, 0] },
  { name: "open_tree", nr: 428, args: [-1, 0, 0, 0, 0] },
  { name: "quotactl", nr: 179, args: [0, 0, 0, 0, 0] },
] as const;

/** Every escape the hostile crate tries, by the name its build script logs. */
export const ESCAPES = [
  "connect 1.1.1.1:53",
  "connect 169.254.169.254:80",
  "connect the host's loopback API",
  "connect the dependency gateway's upstream",
  "list /root",
  "read /root/.bashrc",
  "list /root/.rustup",
  "read another job's file",
  "list another job's directory",
  "list the work root beyond its own attempt",
  "write /usr",
  "write /etc",
  "write the toolchain",
  "write another job's directory",
  "see a host path through /proc or the environment",
  "run without a seccomp filter",
  ...SECCOMP_PROBES.map((p) => `make the ${p.name} system call` as const),
] as const;

/**
 * The escapes that test the sandbox's seccomp filter. In a microVM the job's system calls reach
 * only its own guest kernel — the VM is the boundary, not a filter — so there they are not escapes
 * and the microVM's hostile crate does not try them.
 */
const SECCOMP_ESCAPES: readonly (typeof ESCAPES)[number][] = [
  "run without a seccomp filter",
  ...SECCOMP_PROBES.map((p) => `make the ${p.name} system call` as const),
];

/** The escapes the hostile crate tries in an isolation. */
export function escapesFor(isolation: "sandbox" | "microvm"): readonly (typeof ESCAPES)[number][] {
  return isolation === "sandbox" ? ESCAPES : ESCAPES.filter((e) => !SECCOMP_ESCAPES.includes(e));
}

/** The #[test]s of the hostile crate, each asserting that its escapes were denied. */
export const HOSTILE_TESTS: Record<string, readonly (typeof ESCAPES)[number][]> = {
  connect_public_dns_is_denied: ["connect 1.1.1.1:53"],
  connect_cloud_metadata_is_denied: ["connect 169.254.169.254:80"],
  connect_host_loopback_api_is_denied: ["connect the host's loopback API"],
  connect_gateway_upstream_is_denied: ["connect the dependency gateway's upstream"],
  read_root_home_is_denied: ["list /root", "read /root/.bashrc", "list /root/.rustup"],
  read_other_job_is_denied: ["read another job's file", "list another job's directory"],
  work_root_shows_no_other_attempt: ["list the work root beyond its own attempt"],
  write_usr_is_denied: ["write /usr"],
  write_etc_is_denied: ["write /etc"],
  write_toolchain_is_denied: ["write the toolchain"],
  write_other_job_is_denied: ["write another job's directory"],
  host_paths_are_hidden: ["see a host path through /proc or the environment"],
  seccomp_filter_is_loaded: ["run without a seccomp filter"],
  dangerous_syscalls_are_refused: SECCOMP_PROBES.map((p) => `make the ${p.name} system call` as const),
};

const SECCOMP_ARMS = SECCOMP_PROBES.map(
  (p) =>
    `        ${JSON.stringify(`make the ${p.name} system call`)} => syscall_probe(${JSON.stringify(p.name)}, ${p.nr}, [${p.args.join(", ")}]),`,
).join("\n");

const PROBES_RS = `#![allow(dead_code)]
//! Escape attempts shared by the build script and the tests. Configuration arrives in the
//! job's declared environment: KILN_MARKER, KILN_HOST_PORT, KILN_UPSTREAM_ADDR, KILN_OTHER_SECRET,
//! KILN_WORK_ROOT, KILN_HOST_CANARY, KILN_HOST_PATHS.
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

pub fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn shown<T: std::fmt::Debug>(result: io::Result<T>) -> Result<String, String> {
    result.map(|v| format!("{v:?}")).map_err(|e| e.to_string())
}

fn connect(target: &str) -> Result<String, String> {
    let addr: SocketAddr = target.parse().expect("socket address");
    shown(TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map(|s| s.local_addr()))
}

fn list(path: &str) -> io::Result<Vec<String>> {
    std::fs::read_dir(path)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect()
}

fn write(path: &str) -> Result<String, String> {
    shown(std::fs::write(path, b"written from inside a kiln job\\n"))
}

fn toolchain_bin() -> String {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .find(|d| Path::new(d).join("cargo").exists())
        .unwrap_or("/nonexistent")
        .to_string()
}

/// A raw system call (x86_64): its result, -errno on failure. Raw, so that no libc wrapper
/// (and no crate) stands between the probe and the kernel's seccomp filter.
#[cfg(target_arch = "x86_64")]
fn raw_syscall(nr: i64, a: [i64; 5]) -> i64 {
    let ret: i64;
    unsafe {
        std::arch::asm!("syscall", inlateout("rax") nr => ret, in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    ret
}

/// Allowed unless the kernel answered EPERM (-1): unfiltered, these arguments get another answer.
fn syscall_probe(name: &str, nr: i64, args: [i64; 5]) -> Result<String, String> {
    match raw_syscall(nr, args) {
        -1 => Err(format!("{name}: EPERM")),
        other => Ok(format!("{name} reached the kernel: {other}")),
    }
}

/// Host paths (KILN_HOST_PATHS, one a line) in what the job can read of its own mounts, working
/// directory, environment and the kernel's view of the host.
fn host_paths_visible() -> Result<String, String> {
    let needles: Vec<String> = var("KILN_HOST_PATHS").lines().filter(|l| l.len() > 1).map(String::from).collect();
    let mut texts: Vec<(String, String)> = Vec::new();
    for path in ["/proc/self/mountinfo", "/proc/mounts", "/proc/self/mounts", "/proc/cmdline", "/proc/partitions", "/proc/1/mountinfo"] {
        if let Ok(text) = std::fs::read_to_string(path) {
            texts.push((path.to_string(), text));
        }
    }
    for link in ["/proc/self/cwd", "/proc/self/exe", "/proc/1/cwd", "/proc/1/root"] {
        if let Ok(target) = std::fs::read_link(link) {
            texts.push((link.to_string(), target.display().to_string()));
        }
    }
    // The job's own declared KILN_* variables carry the needles to it; every other one is the sandbox's.
    let environment: String = std::env::vars().filter(|(k, _)| !k.starts_with("KILN_")).map(|(k, v)| format!("{k}={v}\n")).collect();
    texts.push(("the environment".into(), environment));
    for (what, text) in &texts {
        for needle in &needles {
            if text.contains(needle.as_str()) {
                return Ok(format!("{what} shows {needle}"));
            }
        }
    }
    Err(format!("{} places read, none shows any of {} host paths", texts.len(), needles.len()))
}

/// Tries one escape; \`Ok\` means it was allowed.
pub fn attempt(escape: &str, origin: &str) -> Result<String, String> {
    let marker = format!("{}-{origin}", var("KILN_MARKER"));
    let secret = var("KILN_OTHER_SECRET");
    let other_dir = Path::new(&secret).parent().expect("secret's directory").display().to_string();
    let work_root = var("KILN_WORK_ROOT");
    match escape {
        "connect 1.1.1.1:53" => connect("1.1.1.1:53"),
        "connect 169.254.169.254:80" => connect("169.254.169.254:80"),
        "connect the host's loopback API" => connect(&format!("127.0.0.1:{}", var("KILN_HOST_PORT"))),
        "connect the dependency gateway's upstream" => connect(&var("KILN_UPSTREAM_ADDR")),
        "list /root" => shown(list("/root")),
        "read /root/.bashrc" => shown(std::fs::read("/root/.bashrc").map(|b| b.len())),
        "list /root/.rustup" => shown(list("/root/.rustup")),
        "read another job's file" => shown(std::fs::read_to_string(&secret)),
        "list another job's directory" => shown(list(&other_dir)),
        "list the work root beyond its own attempt" => {
            let manifest = var("CARGO_MANIFEST_DIR");
            let own = Path::new(&manifest)
                .strip_prefix(&work_root)
                .ok()
                .and_then(|p| p.components().next())
                .map(|c| c.as_os_str().to_string_lossy().into_owned());
            match list(&work_root) {
                Err(e) => Err(e.to_string()),
                Ok(entries) => {
                    // Files this job itself wrote there (tmp_is_private) are not another attempt.
                    let mine = var("KILN_MARKER");
                    let others: Vec<String> =
                        entries.into_iter().filter(|e| Some(e) != own.as_ref() && !e.contains(&mine)).collect();
                    if others.is_empty() {
                        Err(format!("only its own attempt {own:?} is there"))
                    } else {
                        Ok(format!("sees {others:?} beside its own {own:?}"))
                    }
                }
            }
        }
        "write /usr" => write(&format!("/usr/{marker}")),
        "write /etc" => write(&format!("/etc/{marker}")),
        "write the toolchain" => write(&format!("{}/{marker}", toolchain_bin())),
        "write another job's directory" => write(&format!("{other_dir}/{marker}")),
        "see a host path through /proc or the environment" => host_paths_visible(),
        "run without a seccomp filter" => match std::fs::read_to_string("/proc/self/status") {
            Ok(status) if status.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Seccomp:", "2"]) => {
                Err("Seccomp: 2 (a filter is loaded)".into())
            }
            Ok(status) => Ok(status.lines().find(|l| l.starts_with("Seccomp")).unwrap_or("no Seccomp line").to_string()),
            Err(e) => Ok(format!("/proc/self/status unreadable: {e}")),
        },
${SECCOMP_ARMS}
        other => panic!("unknown escape {other}"),
    }
}

/// /tmp inside is private: the host's canary file is not there, and what is written there
/// (or beside its own attempt directory, which the sandbox builds on that /tmp or on its
/// read-only root) stays inside; the host checks that nothing arrived.
pub fn tmp_is_private(origin: &str) -> Result<String, String> {
    let canary = var("KILN_HOST_CANARY");
    let marker = var("KILN_MARKER");
    let _ = std::fs::write(format!("/tmp/{marker}-{origin}"), b"stays inside\\n");
    let _ = std::fs::write(format!("{}/{marker}-{origin}", var("KILN_WORK_ROOT")), b"stays inside\\n");
    if Path::new(&canary).exists() {
        Ok(format!("the host's {canary} is visible"))
    } else {
        Err("the host's /tmp is not visible".into())
    }
}
`;

/** The hostile crate's tests in an isolation: those whose escapes it tries. */
export function hostileTestsFor(isolation: "sandbox" | "microvm"): Record<string, readonly (typeof ESCAPES)[number][]> {
  const tried = escapesFor(isolation);
  return Object.fromEntries(
    Object.entries(HOSTILE_TESTS).filter(([, escapes]) => escapes.every((e) => tried.includes(e))),
  );
}

const hostileBuildRs = (isolation: "sandbox" | "microvm") => `mod probes;

const ESCAPES: &[&str] = &[
${escapesFor(isolation)
  .map((e) => `    ${JSON.stringify(e)},`)
  .join("\n")}
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut escaped = Vec::new();
    for escape in ESCAPES.iter().copied() {
        match probes::attempt(escape, "build") {
            Ok(how) => {
                println!("cargo:warning=BUILD-PROBE {escape} ALLOWED {how}");
                escaped.push(escape);
            }
            Err(why) => println!("cargo:warning=BUILD-PROBE {escape} DENIED {why}"),
        }
    }
    match probes::tmp_is_private("build") {
        Ok(how) => {
            println!("cargo:warning=BUILD-PROBE see the host's /tmp ALLOWED {how}");
            escaped.push("see the host's /tmp");
        }
        Err(why) => println!("cargo:warning=BUILD-PROBE see the host's /tmp DENIED {why}"),
    }
    if !escaped.is_empty() {
        panic!("the build script escaped the sandbox: {escaped:?}");
    }
}
`;

const hostileTestsRs = (isolation: "sandbox" | "microvm") =>
  Object.entries(hostileTestsFor(isolation))
    .map(
      ([test, escapes]) =>
        `    #[test]\n    fn ${test}() {\n${escapes.map((e) => `        denied(${JSON.stringify(e)});\n`).join("")}    }\n`,
    )
    .join("\n");

const hostileLibRs = (isolation: "sandbox" | "microvm") => `pub fn nothing() {}

#[cfg(test)]
#[path = "../probes.rs"]
mod probes;

#[cfg(test)]
mod tests {
    fn denied(escape: &str) {
        match super::probes::attempt(escape, "test") {
            Ok(how) => panic!("ESCAPED: {escape} was allowed: {how}"),
            Err(why) => println!("DENIED: {escape}: {why}"),
        }
    }

${hostileTestsRs(isolation)}
    #[test]
    fn host_tmp_is_private() {
        if let Ok(how) = super::probes::tmp_is_private("test") {
            panic!("ESCAPED: {how}");
        }
    }
}
`;

/** The hostile crate for an isolation: build script and tests both try every escape it has. */
export function hostileCrateFor(isolation: "sandbox" | "microvm"): Record<string, string> {
  return { "build.rs": hostileBuildRs(isolation), "probes.rs": PROBES_RS, "src/lib.rs": hostileLibRs(isolation) };
}

/** The sandbox's hostile crate: build script and tests both try every escape. */
export const HOSTILE_CRATE: Record<string, string> = hostileCrateFor("sandbox");

/** A test that touches 6 GiB (on a 4 GiB size), in 256 MiB blocks. */
export const MEMORY_HOG_CRATE: Record<string, string> = {
  "src/lib.rs": `pub fn nothing() {}

#[cfg(test)]
mod tests {
    #[test]
    fn fills_memory() {
        let mut blocks = Vec::new();
        for i in 0..24 {
            blocks.push(vec![1u8; 256 << 20]);
            println!("holding {} MiB", (i + 1) * 256);
        }
        std::hint::black_box(&blocks);
        panic!("CONTAINMENT FAILED: held 6 GiB on a 4 GiB size");
    }
}
`,
};

/**
 * A fork bomb in its own test binary (so no other test needs a thread while it rages): every
 * process of it forks copies of itself until a stop file appears. The verdict is what the kernel
 * did, not what a sampling loop saw: the shell reports each fork the kernel refuses on the
 * bomb's stderr, and the test waits for such a refusal (however slowly a loaded machine runs the
 * bomb, the wait only gets longer), then stops the bomb through the file and waits for it to die down.
 */
export const FORK_BOMB_CRATE: Record<string, string> = {
  "src/lib.rs": "pub fn nothing() {}\n",
  "tests/fork_bomb.rs": `use std::fs::OpenOptions;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Live (not yet exited) processes in the sandbox's own pid namespace. Exited ones awaiting
/// their reaper are left out: on cgroup v1 a dying task leaves its cgroup before it is reaped.
fn processes() -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
                .filter(|e| match std::fs::read_to_string(e.path().join("stat")) {
                    Ok(stat) => stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3)).is_some_and(|s| s != "Z" && s != "X"),
                    Err(_) => false,
                })
                .count()
        })
        .unwrap_or(0)
}

/// Forks the kernel refused the bomb: dash writes "Cannot fork" (and that process exits), bash
/// "fork: retry: Resource temporarily unavailable"; one line each.
fn refusals(path: &str) -> usize {
    std::fs::read_to_string(path).map(|text| text.lines().filter(|l| l.contains("fork")).count()).unwrap_or(0)
}

#[test]
fn fork_bomb_is_capped() {
    let pids_max: usize = std::env::var("KILN_PIDS_MAX").expect("KILN_PIDS_MAX").parse().unwrap();
    let stop = "/tmp/stop-the-bomb";
    let errors = "/tmp/bomb-errors";
    let baseline = processes();
    // How long to wait for a refusal, and for the bomb to die down: long past what any machine
    // needs (KILN_BOMB_PATIENCE_SECONDS: a microVM under software emulation forks far slower).
    let patience = Duration::from_secs(
        std::env::var("KILN_BOMB_PATIENCE_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60),
    );
    // Every process forks copies of itself in a loop until the stop file appears, so the
    // bomb keeps pressing against the limit as processes whose fork was refused drop out.
    let bomb = r#"b() { while [ ! -e "$1" ]; do b "$1" & done; exit 0; }; b "$1" & exit 0"#;
    let stderr = OpenOptions::new().create(true).append(true).open(errors).expect("the bomb's stderr");
    Command::new("sh")
        .args(["-c", bomb, "kiln-fork-bomb", stop])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .status()
        .expect("start the bomb");
    // Waits for the event, not for a time: the deadline only ends a wait for a refusal that
    // never comes (no limit at all), long after any machine would have reached the limit.
    let mut peak = 0;
    let give_up = Instant::now() + patience;
    while refusals(errors) == 0 && Instant::now() < give_up {
        peak = peak.max(processes());
        std::thread::sleep(Duration::from_millis(50));
    }
    peak = peak.max(processes());
    let refused = refusals(errors);
    std::fs::write(stop, b"stop").expect("stop file");
    let calm = Instant::now() + patience;
    while processes() > baseline + 2 && Instant::now() < calm {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = processes();
    println!("baseline {baseline}, {refused} forks of the bomb refused, {peak} processes seen at most, {left} left");
    assert!(refused > 0, "the kernel never refused the bomb a fork under pids.max {pids_max}");
    // A sample can miss the peak but never exceed it: more than the limit is a breach.
    assert!(peak <= pids_max, "CONTAINMENT FAILED: {peak} processes under pids.max {pids_max}");
    assert!(left <= baseline + 2, "the bomb did not die down: {left} processes left");
}
`,
  "tests/unreaped.rs": `/// Children that exit but are never waited for keep their pids: they count against the limit too.
#[test]
fn unreaped_children_are_capped() {
    let pids_max: usize = std::env::var("KILN_PIDS_MAX").expect("KILN_PIDS_MAX").parse().unwrap();
    let (mut kept, mut refused) = (Vec::new(), 0);
    for _ in 0..(pids_max * 2) {
        match std::process::Command::new("true").spawn() {
            Ok(child) => kept.push(child),
            Err(_) => refused += 1,
        }
    }
    println!("{} unreaped children, {refused} spawns refused", kept.len());
    assert!(kept.len() < pids_max, "CONTAINMENT FAILED: {} unreaped children under pids.max {pids_max}", kept.len());
    assert!(refused > 0, "no spawn was refused");
    for mut child in kept {
        child.wait().expect("reap");
    }
}
`,
};

/**
 * A build script that starts a fork bomb nobody stops (every process forks in a loop, so it
 * stays pressed against the pids limit), then sleeps: only the wall-clock ceiling ends it.
 * Unless KILN_BOMB is `go` it returns at once, so that a first job builds it into the
 * lineage and the bomb's own job only runs it again (cargo reruns it when KILN_BOMB changes).
 */
export const UNSTOPPABLE_BOMB_CRATE: Record<string, string> = {
  "src/lib.rs": "pub fn nothing() {}\n",
  "build.rs": `use std::process::{Command, Stdio};
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KILN_BOMB");
    if std::env::var("KILN_BOMB").as_deref() != Ok("go") {
        return;
    }
    let marker = std::env::var("KILN_MARKER").expect("KILN_MARKER");
    let bomb = Command::new("setsid")
        .args(["sh", "-c", "b() { while :; do b & done; }; b", &format!("{marker}-bomb")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bomb");
    // Said as soon as the bomb's first process exists, before it can starve this script: a
    // scan for its processes would compete with the bomb for the cgroup's CPU, and on a loaded
    // machine never finish before the ceiling. With -vv cargo streams this line into the log.
    println!("kiln-test: bomb launched as pid {}", bomb.id());
    std::thread::sleep(std::time::Duration::from_secs(600));
}
`,
};

/** Megabytes a build script may write into its OUT_DIR before the trial calls its disk unbounded. */
export const DISK_FILL_GIVE_UP_MIB = 8192;

/**
 * A build script that writes 1 MiB blocks into its OUT_DIR (in the target dir) until a write
 * fails, says how far it got and why, and fails the build — the issue's "4 GiB in 7.8 s".
 * It gives up (and says CONTAINMENT FAILED) past DISK_FILL_GIVE_UP_MIB.
 */
export const DISK_FILL_CRATE: Record<string, string> = {
  "src/lib.rs": "pub fn nothing() {}\n",
  "build.rs": `use std::io::Write;
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    let mut file = std::fs::File::create(format!("{out}/fill")).expect("create the fill file");
    let block = vec![0x6bu8; 1 << 20];
    let mut written = 0u64;
    let error = loop {
        if written >= ${DISK_FILL_GIVE_UP_MIB} {
            break "none: CONTAINMENT FAILED".to_string();
        }
        match file.write_all(&block).and_then(|_| file.flush()) {
            Ok(()) => written += 1,
            Err(e) => break e.to_string(),
        }
    };
    let synced = file.sync_all().map(|_| "synced".to_string()).unwrap_or_else(|e| e.to_string());
    println!("cargo:warning=kiln-test: wrote {written} MiB, then: {error} ({synced})");
    panic!("kiln-test: the disk filled after {written} MiB: {error}");
}
`,
};

/**
 * A job that stays running until the host releases it: its build script writes `started` into
 * its workspace (which the host sees) and waits until `release.txt` there says `go`. The host
 * rewrites that file in place: the workspace is an overlay whose upper layer is the host's
 * directory, and a file the host *adds* behind a mounted overlay may stay hidden behind the
 * overlay's cached lookup, while the content of one already there is read through. Its source
 * holds `secret.txt`, which another job must not read while it runs.
 */
export const VICTIM_CRATE: Record<string, string> = {
  "release.txt": "wait\n",
  "secret.txt": "the victim job's secret\n",
  "src/lib.rs": "pub fn nothing() {}\n",
  "build.rs": `fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    std::fs::write("started", b"started\\n").expect("say started");
    while std::fs::read_to_string("release.txt").map(|t| !t.starts_with("go")).unwrap_or(true) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
`,
};
