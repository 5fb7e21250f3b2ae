#!/bin/sh
# plain.sh OUT: the edit, bare
exec /tmp/p38/bare.sh /tmp/p38/bare ./edit.sh >>"$1" 2>&1
