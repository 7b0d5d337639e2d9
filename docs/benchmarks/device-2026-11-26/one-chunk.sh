#!/usr/bin/env bash
# Device run (2026-11-26, third session): does an idle worker cost anything when a pass is one
# chunk? 1024 ranks x 10^4 phases of the 15 s trace at 10^5 detours/s (offloaded, sync none,
# --timer abstime) on all 16 cores: --threads 16 against --threads 1, alternated; then the
# default (replay-bench-cap2: every core at one chunk) and 2048 ranks with the default once.
set -u
T=/usr/bin/time
if [ ! -x $T ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && T=/tmp/timepkg/usr/bin/time; fi
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # label ranks args...
    local label=$1 n=$2; shift 2
    $T -f "$label: %e s wall, %U s user, %S s sys" .device/bin/replay-bench-cap2 predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace /tmp/dense15.jtr --ranks $n --phases 10000 "$@" -o /tmp/r.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
for r in 1 2 3; do
    run "1024 ranks --threads 16 rep $r" 1024 --threads 16
    run "1024 ranks --threads 1 rep $r" 1024 --threads 1
done
run "1024 ranks default (16 workers)" 1024
run "2048 ranks default (2 workers)" 2048
run "2048 ranks --threads 16" 2048 --threads 16
