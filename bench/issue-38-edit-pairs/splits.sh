#!/bin/sh
# splits.sh LOG: the compile and run halves of each counted run (the first line is the warm-up's)
grep -a '^split compile=' "$1" | tail -n +2 | sed 's/split //' | tr '\n' ';'; echo
