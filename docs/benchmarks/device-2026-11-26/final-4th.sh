#!/usr/bin/env bash
# Device run (2026-11-26, fourth session), on 2 pinned cores (taskset 0,1, --threads 2):
# 1. 2048 ranks x 10^4 phases of a 15 s trace at 10^5 detours/s (offloaded, sync none,
#    --timer abstime): the session's start (rb-main, 4375526) against this session's build
#    (replay-bench), 8 alternated;
# 2. scripts/bench-predict.sh --density 3 with this session's build (the walk beside);
# 3. 10^6 ranks x 10^3 phases of real10k (60 s, 10^4 detours/s): each build once.
set -u
if [ ! -x /usr/bin/time ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && cp /tmp/timepkg/usr/bin/time /usr/bin/time; fi
T=/usr/bin/time
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # label build trace ranks phases
    $T -f "$1: %e s wall, %U s user, %S s sys, %M KiB" taskset -c 0,1 .device/bin/$2 predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace $3 --ranks $4 --phases $5 --threads 2 -o /tmp/$2-$4.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
for r in 1 2 3 4 5 6 7 8; do
    for b in rb-main replay-bench; do run "$b 2048x10^4 rep $r" $b /tmp/dense15.jtr 2048 10000; done
done
cmp -s <(grep -v created_unix /tmp/rb-main-2048.json) <(grep -v created_unix /tmp/replay-bench-2048.json) \
    && echo "2048x10^4 reports equal" || echo "2048x10^4 reports DIFFER"
echo "## density"
JB_BIN_DIR=.device/bin taskset -c 0,1 scripts/bench-predict.sh --density 3 2>/dev/null
echo "## 10^6 x 10^3 real10k"
for b in rb-main replay-bench; do run "$b 10^6x10^3" $b .device/real10k.jtr 1000000 1000; done
cmp -s <(grep -v created_unix /tmp/rb-main-1000000.json) <(grep -v created_unix /tmp/replay-bench-1000000.json) \
    && echo "10^6x10^3 reports equal" || echo "10^6x10^3 reports DIFFER"
