#!/usr/bin/env bash
# Device run (2026-11-26, fourth session), 2 pinned cores: this session's build (rb-c2)
# against fast entries of one lap (rb-1lap), 2048 x 10^4 at 10^5/s, alternated.
set -u
if [ ! -x /usr/bin/time ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && cp /tmp/timepkg/usr/bin/time /usr/bin/time; fi
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in 1 2 3 4 5 6 7 8 9 10; do for b in rb-c2 rb-1lap; do
    /usr/bin/time -f "$b rep $r: %e s wall, %U s user, %S s sys, %M KiB" taskset -c 0,1 .device/bin/$b predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace /tmp/dense15.jtr --ranks 2048 --phases 10000 --threads 2 -o /tmp/$b.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
done; done
cmp -s <(grep -v created_unix /tmp/rb-c2.json) <(grep -v created_unix /tmp/rb-1lap.json) && echo "reports equal" || echo "reports DIFFER"
