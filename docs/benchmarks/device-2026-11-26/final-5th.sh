#!/usr/bin/env bash
# Device run (2026-11-26, fifth session), 2 pinned cores: the session start (rb-d73) against
# this session's end (rb-final), dense15 (10^5/s) 2048 ranks x 10^4 phases, alternated; then
# scripts/bench-predict.sh --density 3 with the session's end (indexed and walk).
set -u
if [ ! -x /usr/bin/time ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && cp /tmp/timepkg/usr/bin/time /usr/bin/time; fi
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 10); do for b in rb-d73 rb-final; do
    /usr/bin/time -f "full rep $r $b: %e s wall, %U s user, %S s sys, %M KiB" taskset -c 0,1 .device/bin/$b predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace /tmp/dense15.jtr --ranks 2048 --phases 10000 --threads 2 -o /tmp/$b.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
done; done
cmp -s <(grep -v created_unix /tmp/rb-d73.json) <(grep -v created_unix /tmp/rb-final.json) && echo "reports equal" || echo "reports DIFFER"
echo "## density (rb-final)"
mkdir -p /tmp/bin && cp .device/bin/jitter-trace /tmp/bin/ && cp .device/bin/rb-final /tmp/bin/replay-bench
JB_BIN_DIR=/tmp/bin taskset -c 0,1 timeout 400 scripts/bench-predict.sh --density 3 2>/dev/null
