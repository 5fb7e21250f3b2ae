#!/bin/sh
# loopdio.sh OUT: as loop.sh, the image attached with direct I/O (losetup --direct-io=on)
unshare --mount --propagation private sh -c '
set -e
dev=$(losetup -f --show --direct-io=on /tmp/p38/disk.ext4)
mount -o nosuid,nodev,noatime,noinit_itable "$dev" /tmp/p38/disk
mount --bind /tmp/p38/disk/target /tmp/p38/bare/target
/tmp/p38/bare.sh /tmp/p38/bare ./edit.sh >>"$1" 2>&1
umount /tmp/p38/bare/target /tmp/p38/disk; losetup -d "$dev"' sh "$1" || exit 1
while [ -n "$(losetup -j /tmp/p38/disk.ext4)" ]; do sleep 0.02; done
