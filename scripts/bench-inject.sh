#!/usr/bin/env bash
# docs/VALIDATION.md, "jitter-inject seen by an outside probe": `jitter-inject` replays a periodic
# 3 ms × 300 µs trace on one CPU while `jitter-collect` probes that CPU, in three arms taking
# turns: `none` (no injector: the CPU's own detours of that length), `O=0` (--overhead 0ns
# --min-sleep 0ns, the old default) and `calibrated` (no flag: O and M from the calibration of
# that CPU, measured at the start with --recalibrate and cached). Per arm and round: injections,
# the share of them the probe saw within 255–360 µs and within 300 µs ± max(2 µs, 2·sd(O)), and
# the median seen length of the 200–400 µs detours.
# The probe runs at SCHED_OTHER like an application (PROBE=other, the default) or at SCHED_FIFO 1
# (PROBE=fifo: below the injector, above every normal task, so that a loaded machine's other
# processes do not take the CPU from it; the kernel's real-time throttling then stalls both for
# 50 ms per second).
# Usage: [PROBE=other|fifo] scripts/bench-inject.sh [CPU] [ROUNDS] [SECONDS]   (defaults: 1, 3, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
CPU=${1:-1}
ROUNDS=${2:-3}
SECS=${3:-10}
OUT_DIR=${OUT_DIR:-/tmp/jb-bench-inject}
PROBE=${PROBE:-other}
probe_args=()
[[ $PROBE == fifo ]] && probe_args=(--sched fifo --prio 1)
mkdir -p "$OUT_DIR"
echo "building (release)..."
timeout 900 cargo build -q --release -p jitter-emulator-cli -p jitter-collect -p jitter-trace-tool --bins
BIN=target/release
echo "== machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +'%F %H:%M') UTC, probe $PROBE"
T="$OUT_DIR/p.jtr"
"$BIN/jitter-trace" synth 'periodic:period=3ms,dur=300us' --duration "$((SECS + 5))s" -o "$T" >/dev/null
echo "calibrating jitter-inject on CPU $CPU (--recalibrate, 1 s replay)"
timeout 60 "$BIN/jitter-inject" --trace "$T" --cpu "$CPU" --duration 1s --recalibrate \
    2>&1 | grep -E '^calibration' | tee "$OUT_DIR/calibration.txt"
sd_o=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['overhead']['sd_ns'])" \
    "$(ls "${XDG_CACHE_HOME:-$HOME/.cache}"/jitterbench/inject-*-cpu"$CPU".json)")
for r in $(seq 1 "$ROUNDS"); do
    for arm in none O=0 calibrated; do
        c="$OUT_DIR/$arm-$r.jtr"
        timeout $((SECS + 30)) "$BIN/jitter-collect" --cpus "$CPU" "${probe_args[@]}" -d "$((SECS + 2))s" -o "$c" \
            >"$OUT_DIR/collect-$arm-$r.txt" 2>&1 &
        col=$!
        sleep 1
        injected=0
        case $arm in
            none) sleep "$SECS" ;;
            O=0) extra=(--overhead 0ns --min-sleep 0ns) ;;
            calibrated) extra=() ;;
        esac
        if [[ $arm != none ]]; then
            out=$(timeout $((SECS + 20)) "$BIN/jitter-inject" --trace "$T" --cpu "$CPU" \
                --duration "${SECS}s" "${extra[@]}" 2>/dev/null)
            injected=${out%% injections*}
        fi
        wait "$col" || true # an implausible collection is kept and says so
        "$BIN/jitter-trace" convert "$c" -o "$OUT_DIR/$arm-$r.csv" >/dev/null 2>&1
        python3 - "$OUT_DIR/$arm-$r.csv" "$arm" "$r" "$injected" "$SECS" "$sd_o" <<'PY'
import csv, statistics, sys
path, arm, rnd, injected, secs, sd_o = sys.argv[1:7]
injected, sd_o = int(injected), float(sd_o)
tol = max(2e3, 2 * sd_o)
runs = [int(r["run_ns"]) for r in csv.DictReader(l for l in open(path) if not l.startswith("#"))]
window = sum(255e3 <= d <= 360e3 for d in runs)
close = sum(abs(d - 300e3) <= tol for d in runs)
near = [d for d in runs if 200e3 <= d <= 400e3]
longer = sum(d > 360e3 for d in runs)
# The `none` arm has no injections: its counts are the CPU's own detours of that length, per
# 3 ms slot of the replay's length (the share a probe would see with no injector at all).
base = injected if injected else int(float(secs) * 1e3 / 3)
med = statistics.median(near) / 1e3 if near else float("nan")
print(f"round {rnd} {arm:>10}: injected {injected:5d}; seen 255–360 µs {window:5d} "
      f"({100 * window / base:5.1f} %), 300 ± {tol / 1e3:.1f} µs {close:5d} "
      f"({100 * close / base:5.1f} %); median 200–400 µs {med:6.1f} µs; >360 µs {longer}")
PY
    done
done
