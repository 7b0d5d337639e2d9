#!/usr/bin/env bash
# The run of docs/BENCHMARKS.md "Strong scaling on a 16-core machine", two cores: replay-bench is
# the session-start build (f211e6c), replay-bench-final the build of 0434e03, both stripped in .device/bin.
# Device run: the session-start build (replay-bench) against the final one (replay-bench-final)
# on two cores (taskset -c 0,1, --threads 2), 2048 ranks x 10^4 phases of a 15 s trace at
# 10^5 detours/s, sync none, --timer abstime; alternated; then loading alone (--phases 1).
set -u
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # build collective phases rep
    /usr/bin/time -f "$2 $1 phases $3 rep $4: %e s wall, %U s user" taskset -c 0,1 .device/bin/$1 predict \
        --engine indexed --timer abstime --model des --force --collective $2 --sync none \
        --trace /tmp/dense15.jtr --ranks 2048 --phases $3 --threads 2 -o /tmp/$1.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
same() { cmp -s <(grep -v created_unix /tmp/replay-bench.json) <(grep -v created_unix /tmp/replay-bench-final.json) && echo "reports equal" || echo "reports DIFFER"; }
for r in 1 2 3 4 5; do for b in replay-bench replay-bench-final; do run $b offloaded 10000 $r; done; done; same
for r in 1 2 3; do for b in replay-bench replay-bench-final; do run $b offloaded 1 $r; done; done
for r in 1 2 3; do for b in replay-bench replay-bench-final; do run $b dissemination 10000 $r; done; done; same
