#!/usr/bin/env bash
# Paying at MPI calls on this machine (docs/BENCHMARKS.md and docs/VALIDATION.md, "Paying at MPI
# calls"): on a trace of this machine, at S = 1,
#   1. how the main job would inject here (`replay-bench choose-inject`: the signal's cost and
#      what it reproduces);
#   2. `replay-bench run --inject boundary` at np 1 and 2 (sync phase): the shares of the
#      detours and noise time paid, per rank and per phase, where and how late;
#   3. libjitter_preload.so (JITTER_INJECT=boundary) in emulator/preload/tests/app/compute_barrier.c
#      at np 1 and 2: the same shares from its summary;
#   4. `replay-bench app --inject boundary` on that program at np 1 and 2: the slowdown of its mean
#      phase time (compute and barrier) with its paired 95 % interval, beside the share of the
#      run's time the library injected.
# Usage: scripts/bench-boundary.sh [trace.jtr] [--pairs K]   (default: collect 10 s on all CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE="" PAIRS=10
while [[ $# -gt 0 ]]; do
    case "$1" in
        --pairs) PAIRS=$2; shift 2 ;;
        -*) echo "error: unknown option '$1' (--pairs K)" >&2; exit 2 ;;
        *) TRACE=$1; shift ;;
    esac
done
OUT_DIR=${OUT_DIR:-/tmp/jb-bench-boundary}
mkdir -p "$OUT_DIR"
nice -n 10 cargo build --release -p jitter-trace-tool -p jitter-collect -p jitter-emulator-cli -p replay-bench \
    -p jitter-preload 2>&1 | tail -1
BIN=$PWD/target/release
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader,tcp \
    OMPI_MCA_btl_vader_single_copy_mechanism=none
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "== machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(load), $(date -u '+%F %H:%M')"
if [[ -z "$TRACE" ]]; then
    TRACE="$OUT_DIR/trace.jtr"
    echo "== collecting 10 s on all CPUs into $TRACE"
    "$BIN/jitter-collect" --duration 10s -o "$TRACE" >"$OUT_DIR/collect.txt" 2>&1 \
        || { cat "$OUT_DIR/collect.txt"; exit 1; }
fi
"$BIN/jitter-trace" stats "$TRACE" | head -20
"$BIN/jitter-emulate" calibrate --json >"$OUT_DIR/calibration.json"
echo "== 1. how the main job injects here"
"$BIN/replay-bench" choose-inject --trace "$TRACE" --calibration "$OUT_DIR/calibration.json"
echo "== 2. replay-bench run --inject boundary, S = 1, sync phase (load $(load))"
for np in 1 2; do
    timeout 600 mpirun -np "$np" --bind-to none "$BIN/replay-bench" run --trace "$TRACE" \
        --inject boundary --sync phase --quanta 1ms --period 5s --seed 1 \
        -o "$OUT_DIR/run-np$np.json" | grep -E "^replay-bench run|^phase|^paid at|^emulator"
done
echo "== 3. libjitter_preload.so, JITTER_INJECT=boundary, compute_barrier (load $(load))"
mpicc -O2 -o "$OUT_DIR/compute_barrier" emulator/preload/tests/app/compute_barrier.c
ITER=$("$OUT_DIR/compute_barrier" --calibrate 1000000)
for np in 1 2; do
    rm -rf "$OUT_DIR/stats-np$np"
    LD_PRELOAD="$BIN/libjitter_preload.so" JITTER_TRACE="$TRACE" JITTER_INJECT=boundary \
        JITTER_STATS_DIR="$OUT_DIR/stats-np$np" JITTER_SEED=1 \
        timeout 600 mpirun -np "$np" --bind-to none "$OUT_DIR/compute_barrier" "$ITER" 5000 50
    python3 - "$OUT_DIR/stats-np$np" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    if f.startswith("rank-"):
        r = json.load(open(os.path.join(d, f)))
        l = r["boundary"]["ledger"]
        paid = sum(l[c]["detours"] for c in ("at_boundary", "in_call", "on_return"))
        paid_ns = sum(l[c]["span_ns"] for c in ("at_boundary", "in_call", "on_return"))
        m = l["missed"]
        print(f"  rank {r['rank']}: paid {paid} detours ({paid_ns/1e6:.3f} ms), missed {m['detours']} "
              f"({m['span_ns']/1e6:.3f} ms): {100*paid/max(1,paid+m['detours']):.3f} % of the detours, "
              f"{100*paid_ns/max(1,paid_ns+m['span_ns']):.3f} % of the time; injected "
              f"{100*r['injected_ns']/r['elapsed_ns']:.2f} % of the replay; "
              f"phases {r['boundary']['calls']['phases']}")
PY
done
echo "== 4. replay-bench app --inject boundary, compute_barrier, $PAIRS pairs (load $(load))"
for np in 1 2; do
    "$BIN/replay-bench" app --trace "$TRACE" --inject boundary --np "$np" --runs "$PAIRS" --seed 3 \
        --metric 'mean_max_qtb_ns ([0-9.]+)' --library "$BIN/libjitter_preload.so" \
        -o "$OUT_DIR/app-np$np.json" -- --bind-to none "$OUT_DIR/compute_barrier" "$ITER" 2000 50 \
        2>/dev/null | tail -8
    python3 - "$OUT_DIR/app-np$np.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
e, s = r["effect"], r["injected_share"]
print(f"  np: slowdown {e}; injected share of the runs {100*s:.2f} % (as a slowdown {100*s/(1-s):.2f} %)")
PY
done
echo "== load after: $(load)"
