#!/bin/sh
# The one-file edit, split: the compile (cargo test --no-run) and the run (cargo test, nothing left to build).
# Wall seconds of each half go to stderr as "split compile=… run=…".
touch src/lib.rs
t0=$(date +%s.%N)
cargo test --no-run --message-format=json-render-diagnostics >/dev/null 2>&1 || exit 1
t1=$(date +%s.%N)
cargo test --message-format=json-render-diagnostics 2>&1 || exit 1
t2=$(date +%s.%N)
echo "split compile=$(awk "BEGIN{print $t1-$t0}") run=$(awk "BEGIN{print $t2-$t1}")" >&2
