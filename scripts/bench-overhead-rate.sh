#!/usr/bin/env bash
# Side by side: replay fidelity of a sparse trace (100 Hz × 150 µs) with O taken at the trace's
# injection rate (the calibration's O-by-rate curve) against the single O measured at 1 kHz
# (given with --overhead-ns), alternating A and B in ROUNDS rounds per timer.
# Usage: scripts/bench-overhead-rate.sh [ROUNDS]   (docs/BENCHMARKS.md, "O depends on the rate")
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OUT_DIR=${OUT_DIR:-/tmp/jb-bench-overhead-rate}
mkdir -p "$OUT_DIR"
cargo build --release -p jitter-emulator -p jitter-trace --bins 2>&1 | tail -1
BIN=target/release
echo "== machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
"$BIN/jitter-trace" synth 'periodic:period=10ms,dur=150us' --duration 30s -o "$OUT_DIR/sparse.jtr" >/dev/null
"$BIN/jitter-emulate" calibrate --refresh | tee "$OUT_DIR/calibration.txt" | grep -E "^(itimer|abstime)|O overhead|O by rate"
for timer in abstime itimer; do
    o=$("$BIN/jitter-emulate" calibrate --json |
        python3 -c "import json,sys; print(round(json.load(sys.stdin)['$timer']['overhead']['median_ns']))")
    for r in $(seq 1 "$ROUNDS"); do
        for arm in rate single; do
            extra=()
            [[ $arm == single ]] && extra=(--overhead-ns "$o")
            "$BIN/jitter-emulate" fidelity --trace "$OUT_DIR/sparse.jtr" --scale 1 --timer "$timer" \
                --duration 5s "${extra[@]}" --json "$OUT_DIR/$timer-$arm-$r.json" >/dev/null 2>&1
            python3 - "$OUT_DIR/$timer-$arm-$r.json" "$timer" "$arm" "$r" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["rows"][0]
e = r["errors"]
print(f"{sys.argv[2]:>8} round {sys.argv[4]} {sys.argv[3]:>6}: O {r['options']['overhead_ns']/1e3:6.2f} µs, "
      f"median detour error {e['median_ns']/1e3:+6.2f} µs, |err| p90 {e['abs_p90_ns']/1e3:6.2f} µs, "
      f"seen {r['matched_rate']:.0f}/s")
PY
        done
    done
done
