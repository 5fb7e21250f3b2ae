#!/bin/sh
# ovlv.sh OUT: as ovl.sh, the writable overlays mounted volatile
# overlays (upper = the directory, lower = an empty one) and the toolchain a read-only overlay,
# at their own paths, as the sandbox's launcher mounts them
exec unshare --mount --propagation private sh -c '
set -e
b=/tmp/p38/bare; tc=/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu
for d in src home; do rm -rf $b/$d.work; mkdir $b/$d.work; mount -t overlay kiln -o lowerdir=/tmp/p38/empty,upperdir=$b/$d,workdir=$b/$d.work,volatile $b/$d; done
mount -t overlay kiln -o ro,lowerdir=$tc:/tmp/p38/empty $tc
exec /tmp/p38/bare.sh $b ./edit.sh >>"$1" 2>&1' sh "$1"
