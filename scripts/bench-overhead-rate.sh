#!/usr/bin/env bash
# Side by side (docs/BENCHMARKS.md, "O by rate ... O after a gap"): replay fidelity with O after
# each gap (the calibration's O-by-rate sweep, `calibrate --overhead-by-gap on`) against the
# single O (`--overhead` = the main median), arms alternating, on a sparse periodic trace
# (100 Hz × 150 µs) and on a real one.
# Usage: scripts/bench-overhead-rate.sh [TIMER] [ROUNDS] [REAL_TRACE]
#        (defaults: abstime, 3, traces/samples/vm-fifo-cpu1.jtr)
set -euo pipefail
cd "$(dirname "$0")/.."
TIMER=${1:-abstime}
ROUNDS=${2:-3}
REAL=${3:-traces/samples/vm-fifo-cpu1.jtr}
OUT_DIR=${OUT_DIR:-/tmp/jb-bench-overhead-rate}
mkdir -p "$OUT_DIR"
cargo build --release -p jitter-emulator-cli -p jitter-trace-tool --bins 2>&1 | tail -1 || true
BIN=target/release
echo "== machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +'%F %H:%M') UTC"
"$BIN/jitter-trace" synth 'periodic:period=10ms,dur=150us' --duration 30s -o "$OUT_DIR/sparse.jtr" >/dev/null
"$BIN/jitter-emulate" calibrate --refresh --overhead-by-gap on | tee "$OUT_DIR/calibration.txt" |
    grep -E "^(itimer|abstime)|O overhead|O by rate"
trap '"$BIN/jitter-emulate" calibrate --overhead-by-gap off >/dev/null' EXIT
o=$("$BIN/jitter-emulate" calibrate --json |
    python3 -c "import json,sys; print(round(json.load(sys.stdin)['$TIMER']['overhead']['median_ns']))")
for r in $(seq 1 "$ROUNDS"); do
    for trace in sparse real; do
        if [[ $trace == sparse ]]; then t="$OUT_DIR/sparse.jtr" scales=1; else t="$REAL" scales=1,6; fi
        for arm in gap single; do
            extra=()
            [[ $arm == single ]] && extra=(--overhead "${o}ns")
            "$BIN/jitter-emulate" fidelity --trace "$t" --scale "$scales" --timer "$TIMER" \
                --duration 5s --drop-above 1ms "${extra[@]}" --json "$OUT_DIR/$arm.json" \
                >/dev/null 2>&1
            python3 - "$OUT_DIR/$arm.json" "$TIMER" "$trace" "$arm" "$r" <<'PY'
import json, sys
for row in json.load(open(sys.argv[1]))["rows"]:
    e = row["errors"]
    print(f"{sys.argv[2]:>8} round {sys.argv[5]} {sys.argv[3]:>6} {sys.argv[4]:>6} "
          f"S={row['scale']:g}: median detour error {e['median_ns']/1e3:+6.2f} µs, "
          f"|err| p90 {e['abs_p90_ns']/1e3:6.2f} µs, seen {row['matched_rate']:.0f}/s")
PY
        done
    done
done
