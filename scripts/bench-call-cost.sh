#!/usr/bin/env bash
# What libjitter_preload.so adds to an MPI call (docs/BENCHMARKS.md, "## Preload library"):
# emulator/preload/tests/app/call_cost.c makes one call N times and prints its own time per call
# (MPI_Waitall(0, NULL, MPI_STATUSES_IGNORE) at -np 1 by default: a call that does nothing);
# each pair runs it once without the library and once with it, in an order drawn per pair from
# the seed; the difference per pair, its mean and 95 % t-interval.
#   --mode boundary   JITTER_INJECT=boundary over a trace whose detours fall outside the loop
#                     (one 1 µs detour per 100 s): the per-call check and nothing paid
#   --mode profile    JITTER_PROFILE (the profile's record per call)
#   --call barrier|allreduce --np 2   a collective (paying at calls: always through its
#                     nonblocking twin, MPI_Ibarrier/MPI_Iallreduce polled with MPI_Test)
# Usage: scripts/bench-call-cost.sh [--mode boundary|profile] [--call waitall|barrier|allreduce]
#        [--np P] [--pairs K] [--calls N] [--seed S]
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=boundary PAIRS=10 CALLS=2000000 SEED=7 CALL=waitall NP=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --mode) MODE=$2; shift 2 ;;
        --pairs) PAIRS=$2; shift 2 ;;
        --calls) CALLS=$2; shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        --call) CALL=$2; shift 2 ;;
        --np) NP=$2; shift 2 ;;
        *) echo "error: unknown argument '$1' (--mode, --call, --np, --pairs, --calls, --seed)" >&2; exit 2 ;;
    esac
done
case "$MODE" in boundary|profile) ;; *) echo "error: --mode must be boundary or profile, got '$MODE'" >&2; exit 2 ;; esac
OUT_DIR=${OUT_DIR:-/tmp/jb-bench-call-cost}
rm -rf "$OUT_DIR" && mkdir -p "$OUT_DIR"
nice -n 10 cargo build --release -p jitter-preload -p jitter-trace-tool 2>&1 | tail -1
LIB=$PWD/target/release/libjitter_preload.so
mpicc -O2 -o "$OUT_DIR/call_cost" emulator/preload/tests/app/call_cost.c
target/release/jitter-trace synth --duration 1000s -o "$OUT_DIR/sparse.jtr" 'periodic:period=100s,dur=1us' >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader,tcp \
    OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "== machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
run() { # $1 = with|without
    local vars=()
    if [[ $1 == with ]]; then
        vars=(LD_PRELOAD="$LIB" JITTER_STATS_DIR="$OUT_DIR/stats")
        if [[ $MODE == boundary ]]; then
            vars+=(JITTER_TRACE="$OUT_DIR/sparse.jtr" JITTER_INJECT=boundary)
        else
            vars+=(JITTER_PROFILE="$OUT_DIR/app.json")
        fi
    fi
    env "${vars[@]}" timeout 300 mpirun -np "$NP" --bind-to none "$OUT_DIR/call_cost" "$CALLS" "$CALL" 2>/dev/null \
        | awk '/per_call_ns/ {print $2}'
}
for pair in $(seq 1 "$PAIRS"); do
    first=$(python3 -c "import random; r=random.Random($SEED*1000+$pair); print(r.choice(['with','without']))")
    if [[ $first == with ]]; then a=$(run with); b=$(run without); else b=$(run without); a=$(run with); fi
    echo "$pair $b $a" | tee -a "$OUT_DIR/pairs.txt"
done
python3 - "$OUT_DIR/pairs.txt" "$MODE" "$CALL" "$NP" <<'PY'
import math, statistics, sys
rows = [tuple(map(float, l.split()[1:])) for l in open(sys.argv[1])]
d = [w - wo for wo, w in rows]
n, m, s = len(d), statistics.mean(d), statistics.stdev(d)
t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262,
     12: 2.201, 15: 2.145, 20: 2.093, 30: 2.045}.get(n, 1.96)
h = t * s / math.sqrt(n)
print(f"added per call ({sys.argv[2]}, {sys.argv[3]} at -np {sys.argv[4]}): mean {m:.1f} ns, 95 % t-interval [{m-h:.1f}, {m+h:.1f}] ns, "
      f"sd {s:.1f} ns, {n} pairs; without the library {statistics.mean(r[0] for r in rows):.2f} ns/call")
PY
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
