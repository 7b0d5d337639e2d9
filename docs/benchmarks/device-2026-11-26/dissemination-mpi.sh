#!/usr/bin/env bash
# The run of docs/BENCHMARKS.md "Strong scaling on a 16-core machine": replay-bench is the build
# before the alltoallv change (the allreduce of all send ends), replay-bench-new the one after;
# .device/bin held both (stripped) and jitter-trace; MPIRUN the carried OpenMPI orterun.
# Device run: dissemination at 10^6 ranks under MPI, the allreduce build (replay-bench) against
# the alltoallv build (replay-bench-new), alternated per process count.
set -u
J=.device/bin/jitter-trace
$J synth 'periodic:period=4ms,dur=uniform:2us:4us,jitter=20us+poisson:rate=10000/s,dur=lognormal:2us:0.5+poisson:rate=2/s,dur=exp:200us' \
    --duration 60s --streams 4 --seed 1 -o /tmp/real10k.jtr >/dev/null
m=("$MPIRUN" --allow-run-as-root --bind-to core)
a=(predict --engine indexed --timer abstime --model des --force --collective dissemination
   --sync none --trace /tmp/real10k.jtr --ranks 1000000)
echo "# $(date -u +%FT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for np in 16 8 4 2; do
    for b in replay-bench-new replay-bench; do
        /usr/bin/time -f "$b np $np phases 20: %e s, %M KB" timeout 120 "${m[@]}" -np $np .device/bin/$b "${a[@]}" \
            --phases 20 --threads 1 -o /tmp/$b.json >/dev/null 2>/tmp/err || tail -3 /tmp/err
        tail -1 /tmp/err
    done
    cmp -s <(grep -v created_unix /tmp/replay-bench.json) <(grep -v created_unix /tmp/replay-bench-new.json) \
        && echo "np $np reports equal" || echo "np $np reports DIFFER"
done
/usr/bin/time -f "new 1 process 16 threads phases 20: %e s, %M KB" taskset -c 0-15 .device/bin/replay-bench-new "${a[@]}" \
    --phases 20 --threads 16 -o /tmp/t16.json >/dev/null 2>/tmp/err; tail -1 /tmp/err
cmp -s <(grep -v created_unix /tmp/t16.json) <(grep -v created_unix /tmp/replay-bench-new.json) && echo "16 threads equal"
/usr/bin/time -f "new np 16 phases 100: %e s, %M KB" timeout 200 "${m[@]}" -np 16 .device/bin/replay-bench-new "${a[@]}" \
    --phases 100 --threads 1 -o /tmp/p100.json >/dev/null 2>/tmp/err; tail -1 /tmp/err
grep -A3 '"results"' /tmp/p100.json | head -5
