#!/bin/sh
# ns.sh OUT: the edit, bare, in a private mount namespace (the overlay pair's baseline)
exec unshare --mount --propagation private sh -c 'exec /tmp/p38/bare.sh /tmp/p38/bare ./edit.sh >>"$1" 2>&1' sh "$1"
