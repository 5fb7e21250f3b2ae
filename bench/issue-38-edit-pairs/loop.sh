#!/bin/sh
# loop.sh OUT: the edit, bare, in a private mount namespace whose target dir is a copy of the warm
# one on a loop-mounted ext4 image (the sandbox's mount options), mounted afresh; the run ends
# when the namespace is gone and no loop device holds the image (as the executor waits)
unshare --mount --propagation private sh -c '
set -e
mount -o loop,nosuid,nodev,noatime,noinit_itable /tmp/p38/disk.ext4 /tmp/p38/disk
mount --bind /tmp/p38/disk/target /tmp/p38/bare/target
exec /tmp/p38/bare.sh /tmp/p38/bare ./edit.sh >>"$1" 2>&1' sh "$1" || exit 1
while [ -n "$(losetup -j /tmp/p38/disk.ext4)" ]; do sleep 0.02; done
