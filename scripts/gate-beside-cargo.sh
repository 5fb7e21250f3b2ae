#!/bin/bash
# The whole gate (`CI=true bash .ci/run`) on fresh clones, N runs in a row, while a cargo build of
# Debian's tera crate loops beside it (`cargo clean && nice -19 cargo build --offline`): how
# docs/reliability.md's "The whole gate beside a cargo build" was measured.
#
#   bash scripts/gate-beside-cargo.sh                  # 10 runs of this repository's HEAD
#   N=3 REF=main WORK=/tmp/gate bash scripts/gate-beside-cargo.sh
#
# N: runs (stops at the first failure). REF: the commit or branch every run clones (default: HEAD
# as it is now, fixed for all runs). WORK: where the clones, the load's crate and the logs go.
# SHARED: the directory the gate finds beside the clone as ../shared (default: ../shared).
# One line per run on standard output: verdict, seconds, test counts, cargo builds beside.
set -u
cd "$(dirname "$0")/.."
REPO=$(pwd)
N=${N:-10}
REF=${REF:-$(git rev-parse HEAD)}
WORK=${WORK:-$(mktemp -d /tmp/kiln-gate-XXXXXX)}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
[ -d "$SHARED" ] || { echo "no shared directory at $SHARED (set SHARED)" >&2; exit 2; }
tera=$(ls -d /usr/share/cargo/registry/tera-* 2>/dev/null | sort -V | tail -1)
[ -n "$tera" ] || { echo "no Debian tera crate (apt-get install librust-tera-dev)" >&2; exit 2; }
mkdir -p "$WORK/load/.cargo" "$WORK/logs" && : > "$WORK/logs/load.log"
cp -r "$tera" "$WORK/load/crate" && rm -f "$WORK/load/crate/Cargo.lock"
printf '[source.crates-io]\nreplace-with = "debian"\n[source.debian]\ndirectory = "/usr/share/cargo/registry"\n[net]\noffline = true\n' > "$WORK/load/.cargo/config.toml"
# The load runs in a session of its own, so the whole of it (cargo and rustc too) is stopped as one
# process group when this script ends, however it ends.
WORK="$WORK" setsid bash -c '
  cd "$WORK/load/crate" || exit 1
  while :; do
    cargo clean -q 2>/dev/null
    nice -n 19 cargo build -q --offline > "$WORK/logs/load-last.log" 2>&1
    echo "$(date -u +%T) build rc=$?" >> "$WORK/logs/load.log"
  done
' &
load=$!
trap 'kill -- -"$load" 2>/dev/null' EXIT
echo "clones of $REF in $WORK, a cargo build looping beside (pid $load)"
for i in $(seq "$N"); do
  run="$WORK/run$i"
  git clone -q "$REPO" "$run/kiln" && git -C "$run/kiln" checkout -q "$REF" && ln -s "$SHARED" "$run/shared"
  before=$(wc -l < "$WORK/logs/load.log")
  start=$(date +%s)
  (cd "$run/kiln" && CI=true bash .ci/run) > "$WORK/logs/run$i.log" 2>&1
  rc=$?
  after=$(wc -l < "$WORK/logs/load.log")
  counts=$(grep -E "^# (pass|fail) " "$WORK/logs/run$i.log" | tr '\n' ' ')
  echo "run $i: rc=$rc $(($(date +%s) - start)) s ${counts}cargo builds beside: $((after - before))"
  rm -rf "$run"
  [ "$rc" -eq 0 ] || { echo "run $i failed: $WORK/logs/run$i.log" >&2; exit 1; }
done
