#!/bin/sh
# bw.sh OUT [bwrap options...]: the edit in bubblewrap over the host's own root (same paths as bare), env as bare.sh
out=$1; shift
exec /tmp/p38/bare.sh /tmp/p38/bare bwrap --bind / / --dev /dev --proc /proc "$@" -- ./edit.sh >>"$out" 2>&1 5</tmp/p38/filter.bpf
