#!/usr/bin/env bash
# Benchmarks of the JitterEmulator (docs/BENCHMARKS.md, "## Emulator"):
#   1. calibration: O (median/sd/p90/p99), L for both timers, M, spin cost;
#   2. fidelity at S = 1, 3, 6 with both timers on a real trace collected here;
#   3. drift after 60 s, abstime vs itimer.
# Usage: scripts/bench-emulator.sh [trace.jtr]   (default: collect 10 s on CPU 1 first)
# Output goes to stdout and to $OUT_DIR (default /tmp/jb-bench-emulator).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${OUT_DIR:-/tmp/jb-bench-emulator}
mkdir -p "$OUT_DIR"
cargo build --release -p jitter-emulator-cli -p jitter-collect -p jitter-trace-tool --bins 2>&1 | tail -1
BIN=target/release
echo "== machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
echo "== calibration"
"$BIN/jitter-emulate" calibrate --refresh | tee "$OUT_DIR/calibration.txt"
TRACE=${1:-}
if [[ -z "$TRACE" ]]; then
    TRACE="$OUT_DIR/real.jtr"
    # At SCHED_FIFO so that the trace holds the OS's noise rather than preemption by other
    # processes on this shared machine.
    echo "== collecting 10 s on CPU 1 (SCHED_FIFO 50) into $TRACE"
    "$BIN/jitter-collect" --cpus 1 --sched fifo --prio 50 --duration 10s -o "$TRACE" \
        >"$OUT_DIR/collect.txt" 2>&1 || { cat "$OUT_DIR/collect.txt"; exit 1; }
fi
O_NS=$("$BIN/jitter-emulate" calibrate --json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["abstime"]["overhead"]["median_ns"]))')
echo "== scale covering 77 % of the detours at O = $O_NS ns (abstime median)"
"$BIN/jitter-trace" stats --overhead "${O_NS}ns" --share 0.77 --scale 1,3,6 "$TRACE" | tee "$OUT_DIR/share.txt"
echo "== fidelity (trace $TRACE)"
"$BIN/jitter-emulate" fidelity --trace "$TRACE" --scale 1,3,6 --timer itimer,abstime \
    --duration 10s --drop-above 1ms --json "$OUT_DIR/fidelity.json" --save "$OUT_DIR/fid" | tee "$OUT_DIR/fidelity.txt"
mkdir -p docs/emulator
for s in 1 3 6; do
    for t in itimer abstime; do
        "$BIN/jitter-trace" plot --kind density --title "S = $s, $t: source vs re-collected / S" \
            -o "docs/emulator/fidelity-S$s-$t.svg" \
            "$OUT_DIR/fid/source-S$s-$t.jtr" "$OUT_DIR/fid/recollected-S$s-$t.jtr" >/dev/null
    done
done
echo "== drift after 60 s (1 kHz x 100 us periodic trace)"
"$BIN/jitter-emulate" drift --duration 60s | tee "$OUT_DIR/drift.txt"
