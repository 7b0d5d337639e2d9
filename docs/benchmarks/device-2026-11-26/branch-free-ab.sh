#!/usr/bin/env bash
# Device run (2026-11-26, fourth session): 2048 ranks x 10^4 phases of the 15 s trace at
# 10^5 detours/s (offloaded, sync none, --timer abstime) on 2 pinned cores (taskset 0,1,
# --threads 2): the session's start (main) against the prefetch tickets (tk2), the
# branch-free counts (bk4) and the branch-free hold (hd), alternated; then the density
# sweep of the last build beside main.
set -u
T=/usr/bin/time
if [ ! -x $T ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && T=/tmp/timepkg/usr/bin/time; fi
synth() { # rate file
    .device/bin/jitter-trace synth "poisson:rate=$1/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
        --duration 15s --streams 1 --seed 2 -o "$2" >/dev/null
}
synth 100000 /tmp/dense15.jtr
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # label trace build
    $T -f "$1: %e s wall, %U s user, %S s sys" taskset -c 0,1 .device/bin/$3 predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace $2 --ranks 2048 --phases 10000 --threads 2 -o /tmp/$3.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
for r in 1 2 3 4 5 6; do
    for b in rb-main rb-tk2 rb-bk4 rb-hd; do run "$b rep $r" /tmp/dense15.jtr $b; done
done
for b in rb-tk2 rb-bk4 rb-hd; do
    cmp -s <(grep -v created_unix /tmp/rb-main.json) <(grep -v created_unix /tmp/$b.json) && echo "$b report equal to main" || echo "$b report DIFFERS"
done
for rate in 1000 10000 30000; do
    synth $rate /tmp/d$rate.jtr
    for r in 1 2 3; do for b in rb-main rb-hd; do run "$b ${rate}/s rep $r" /tmp/d$rate.jtr $b; done; done
done
