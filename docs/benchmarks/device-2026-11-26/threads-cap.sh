#!/usr/bin/env bash
# Device run (2026-11-26, third session): on all 16 cores, 2048 ranks x 10^4 phases of the
# 15 s trace at 10^5 detours/s (offloaded, sync none, --timer abstime): the leaner build with
# --threads 16 against the build whose default caps the workers at one per 1024 ranks
# (replay-bench-cap, no --threads: 2 workers), alternated; then the capped default on 2 cores.
set -u
T=/usr/bin/time
if [ ! -x $T ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && T=/tmp/timepkg/usr/bin/time; fi
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # label cores build args...
    local label=$1 cores=$2 b=$3; shift 3
    $T -f "$label: %e s wall, %U s user, %S s sys" taskset -c "$cores" .device/bin/$b predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace /tmp/dense15.jtr --ranks 2048 --phases 10000 "$@" -o /tmp/$b.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
all=0-$(($(nproc) - 1))
for r in 1 2 3 4; do
    run "lean --threads 16, cores $all, rep $r" $all replay-bench-lean --threads 16
    run "cap default, cores $all, rep $r" $all replay-bench-cap
done
for r in 1 2 3; do run "cap default, cores 0,1, rep $r" 0,1 replay-bench-cap; done
cmp -s <(grep -v created_unix /tmp/replay-bench-lean.json) <(grep -v created_unix /tmp/replay-bench-cap.json) && echo "reports equal" || echo "reports DIFFER"
