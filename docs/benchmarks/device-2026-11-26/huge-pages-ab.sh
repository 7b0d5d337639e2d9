#!/usr/bin/env bash
# Device run (2026-11-26, second session): last session's final build (replay-bench-final)
# against this session's (replay-bench-thp: index arrays advised huge pages) on two cores
# (taskset -c 0,1, --threads 2), 2048 ranks x 10^4 phases of a 15 s trace at 10^5 detours/s,
# offloaded, sync none, --timer abstime; alternated; then loading alone (--phases 1).
set -u
[ -x /usr/bin/time ] || { echo "no /usr/bin/time"; exit 1; }
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
run() { # build phases rep
    /usr/bin/time -f "$1 phases $2 rep $3: %e s wall, %U s user, %S s sys" taskset -c 0,1 .device/bin/$1 predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace /tmp/dense15.jtr --ranks 2048 --phases $2 --threads 2 -o /tmp/$1.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
same() { cmp -s <(grep -v created_unix /tmp/replay-bench-final.json) <(grep -v created_unix /tmp/replay-bench-thp.json) && echo "reports equal" || echo "reports DIFFER"; }
for r in 1 2 3 4 5 6; do for b in replay-bench-final replay-bench-thp; do run $b 10000 $r; done; done; same
for r in 1 2 3 4; do for b in replay-bench-final replay-bench-thp; do run $b 1 $r; done; done
a=$(grep thp_fault_alloc /proc/vmstat | cut -d' ' -f2); run replay-bench-thp 1 x; b=$(grep thp_fault_alloc /proc/vmstat | cut -d' ' -f2); echo "huge page faults of one thp load: $((b - a))"
