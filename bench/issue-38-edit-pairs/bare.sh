#!/bin/sh
# bare cargo, the same variables kiln injects and sets: bare.sh DIR args...
d=$1; shift
cd $d/src
exec env -i PATH=/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin:/usr/bin:/bin HOME=$d/home CARGO_HOME=$d/home CARGO_TARGET_DIR=$d/target CARGO_NET_OFFLINE=true CARGO_BUILD_JOBS=2 CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_TERM_COLOR=never "$@"
