#!/bin/bash
# Reliability trial T15 (noisy neighbours) at several per-tenant ingress bounds, in rotation, on a
# quiet machine, one line per run: how docs/reliability.md's sweep of the bound was measured.
#
#   bash scripts/t15-sweep.sh                      # the default bound and none, both engines, 3 rounds
#   BOUNDS="0 4194304:1048576 1048576:1048576" ENGINES=postgres RUNS=2 bash scripts/t15-sweep.sh
#
# BOUNDS: space-separated `rate:burst` in bytes (KILN_TENANT_INGRESS_BYTES_PER_SECOND and
# KILN_TENANT_INGRESS_BURST_BYTES), `0` for no bound, `default` for the server's default.
# ENGINES: sqlite and/or postgres. RUNS: rounds over every bound and engine. ALONE and BESIDE:
# T15's seconds alone and beside the noise (30 and 75 as `npm run reliability -- t15` runs it).
# NOISE: KILN_T15_NOISE (default all three kinds). Needs a build (`npm run build`); writes each
# run's whole output to OUT (default t15-sweep.log) and its figures to standard output.
set -u
cd "$(dirname "$0")/.."
BOUNDS=${BOUNDS:-"default 0"}
ENGINES=${ENGINES:-"sqlite postgres"}
RUNS=${RUNS:-3}
OUT=${OUT:-t15-sweep.log}
TRIAL=packages/server/dist/reliability/t15-noisy-neighbours.js
[ -f "$TRIAL" ] || { echo "no $TRIAL: run npm run build first" >&2; exit 2; }
# The project's Node.js runtime where setup linked one (scripts/project-runtime.mjs), else the machine's.
NODE=node_modules/.bin/node
[ -x "$NODE" ] || NODE=node
for round in $(seq "$RUNS"); do
  for engine in $ENGINES; do
    for bound in $BOUNDS; do
      env=(KILN_RELIABILITY_DIALECTS="$engine" KILN_T15_ALONE_SECONDS="${ALONE:-30}" KILN_T15_BESIDE_SECONDS="${BESIDE:-75}")
      [ -n "${NOISE:-}" ] && env+=(KILN_T15_NOISE="$NOISE")
      case "$bound" in
        default) ;;
        0) env+=(KILN_TENANT_INGRESS_BYTES_PER_SECOND=0) ;;
        *:*) env+=(KILN_TENANT_INGRESS_BYTES_PER_SECOND="${bound%%:*}" KILN_TENANT_INGRESS_BURST_BYTES="${bound##*:}") ;;
        *) echo "a bound is rate:burst, 0 or default, got $bound" >&2; exit 2 ;;
      esac
      started="$(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
      output=$(env "${env[@]}" "$NODE" "$TRIAL" 2>&1)
      printf '== round %s %s bound=%s %s\n%s\n' "$round" "$engine" "$bound" "$started" "$output" >> "$OUT"
      figures=$(grep -o "CPU beside the noise: server [^,]*\|PostgreSQL [0-9.]* s\|p99 [0-9.]* ms alone → [^;]*" <<< "$output" | tr '\n' ' ')
      echo "round $round $engine bound=$bound ($started): ${figures:-no figure, see $OUT}"
    done
  done
done
