#!/usr/bin/env bash
# Device run (2026-11-26, third session): the previous main (replay-bench-thp, as bd6240a),
# loading side by side (replay-bench-par, b503988) and the leaner visit (replay-bench-lean,
# e421d86), on two cores (taskset -c 0,1, --threads 2): loading alone (--phases 1), then 2048
# ranks x 10^4 phases of a 15 s trace at 10^5 detours/s, offloaded, sync none, --timer abstime;
# alternated; then the same on all cores (--threads $(nproc)) once each.
set -u
T=/usr/bin/time
if [ ! -x $T ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && T=/tmp/timepkg/usr/bin/time; fi
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
B="replay-bench-thp replay-bench-par replay-bench-lean"
run() { # build phases rep cores threads
    $T -f "$1 phases $2 cores $4 rep $3: %e s wall, %U s user, %S s sys" taskset -c "$4" .device/bin/$1 predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace /tmp/dense15.jtr --ranks 2048 --phases $2 --threads $5 -o /tmp/$1.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
same() { for b in replay-bench-par replay-bench-lean; do cmp -s <(grep -v created_unix /tmp/replay-bench-thp.json) <(grep -v created_unix /tmp/$b.json) && echo "$b: report equal" || echo "$b: report DIFFERS"; done; }
for r in 1 2 3 4; do for b in $B; do run $b 1 $r 0,1 2; done; done; same
for r in 1 2 3 4 5 6; do for b in $B; do run $b 10000 $r 0,1 2; done; done; same
all=0-$(($(nproc) - 1))
for b in $B; do run $b 10000 1 $all $(nproc); done; same
