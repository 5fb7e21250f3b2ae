#!/bin/sh
# quota.sh OUT: the edit, bare, inside a cpu cgroup with the attempt's 2-vCPU CFS quota
echo $$ > /sys/fs/cgroup/cpu/p38/quota/cgroup.procs || exit 1
exec /tmp/p38/bare.sh /tmp/p38/bare ./edit.sh >>"$1" 2>&1
