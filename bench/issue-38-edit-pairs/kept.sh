#!/bin/sh
# kept.sh OUT: as loop.sh, but the image stays mounted (at /tmp/p38/disk, mounted once before the
# pair): each run only binds its target dir, so the file system's caches stay warm
exec unshare --mount --propagation private sh -c '
set -e
mount --bind /tmp/p38/disk/target /tmp/p38/bare/target
exec /tmp/p38/bare.sh /tmp/p38/bare ./edit.sh >>"$1" 2>&1' sh "$1"
