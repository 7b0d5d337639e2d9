#!/usr/bin/env bash
# Device run (2026-11-26, fifth session), 2 pinned cores: the session start (rb-d73) against
# faster loading (rb-5ed: chunks decoded side by side, huge pages for records and plans),
# dense15 (10^5/s) 2048 ranks x 1 phase (loading) and x 10^4 phases, alternated; 10^6 x 10^3
# of real10k once each.
set -u
if [ ! -x /usr/bin/time ]; then dpkg -x .device/debs/time_*.deb /tmp/timepkg && cp /tmp/timepkg/usr/bin/time /usr/bin/time; fi
.device/bin/jitter-trace synth "poisson:rate=100000/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
    --duration 15s --streams 1 --seed 2 -o /tmp/dense15.jtr >/dev/null
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# THP enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled), defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag); $(grep -E '^compact_stall' /proc/vmstat)"
run() { # bin phases label
    /usr/bin/time -f "$3 $1: %e s wall, %U s user, %S s sys, %M KiB" taskset -c 0,1 .device/bin/$1 predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace /tmp/dense15.jtr --ranks 2048 --phases $2 --threads 2 -o /tmp/$1-$2.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
}
echo "## loading: 2048 x 1 phase"
for r in $(seq 12); do for b in rb-d73 rb-5ed; do run $b 1 "load rep $r"; done; done
echo "## 2048 x 10^4 phases"
for r in $(seq 8); do for b in rb-d73 rb-5ed; do run $b 10000 "full rep $r"; done; done
for p in 1 10000; do
  cmp -s <(grep -v created_unix /tmp/rb-d73-$p.json) <(grep -v created_unix /tmp/rb-5ed-$p.json) && echo "reports equal ($p phases)" || echo "reports DIFFER ($p phases)"
done
echo "## 10^6 x 10^3 real10k"
for b in rb-5ed rb-d73; do
    /usr/bin/time -f "1M $b: %e s wall, %U s user, %S s sys, %M KiB" taskset -c 0,1 timeout 120 .device/bin/$b predict \
        --engine indexed --timer abstime --model des --force --collective offloaded --sync none \
        --trace .device/real10k.jtr --ranks 1000000 --phases 1000 --threads 2 -o /tmp/$b-1m.json >/dev/null 2>/tmp/err
    tail -1 /tmp/err
done
cmp -s <(grep -v created_unix /tmp/rb-d73-1m.json) <(grep -v created_unix /tmp/rb-5ed-1m.json) && echo "reports equal (10^6)" || echo "reports DIFFER (10^6)"
echo "# $(grep -E '^compact_stall' /proc/vmstat)"
