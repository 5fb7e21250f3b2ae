#!/bin/sh
# relay.sh OUT: the edit, bare, its stdout and stderr through the sandbox's output relay (ordered-output.ts) into OUT
exec /tmp/p38/bare.sh /tmp/p38/bare perl -e "$(cat /tmp/p38/relay.pl)" -- ./edit.sh >>"$1"
