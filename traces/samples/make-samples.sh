#!/usr/bin/env bash
# Regenerates the sample traces of traces/samples/ (see README.md there).
#
#   traces/samples/make-samples.sh [synthetic|real|all|shared|fifo|daemon]     (default: all)
#
# synthetic: synthetic-rl1.jtr and synthetic-bglio.jtr, shaped after the published trace statistics
#            of paper 001 (pure functions of spec, duration and seed: byte-identical on every run).
# real:      vm-shared-allcpus.jtr (all CPUs, ordinary policy, 10 s), vm-fifo-cpu1.jtr (CPU 1,
#            probe at SCHED_FIFO 1, 10 s) and vm-daemon-cpu1.jtr (the same with a SCHED_FIFO 50
#            daemon on CPU 1 waking every 10 ms and spinning 300 us). Needs root (chrt,
#            SCHED_FIFO) and at least 2 CPUs; the result depends on the machine and on its load.
#            `shared`, `fifo` and `daemon` make one of the three real samples.
# Each trace gets a <name>.stats.txt beside it: `jitter-trace stats` plus the extra statistics
# the README compares with the paper.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
what="${1:-all}"
case "$what" in
synthetic | real | all | shared | fifo | daemon) ;;
*)
    echo "error: unknown argument \`$what\` (use synthetic, real, all, shared, fifo or daemon)" >&2
    exit 2
    ;;
esac

bin="$root/target/release"
if [[ ! -x "$bin/jitter-trace" || ! -x "$bin/jitter-collect" ]]; then
    echo "building jitter-trace and jitter-collect (release)..."
    (cd "$root" && cargo build --release -q -p jitter-trace -p jitter-collect)
fi
jt="$bin/jitter-trace"

# Extra statistics from the CSV export: share of sleeps < 130 us (paper 001 §IV-B), share of
# detours in 10-50 us, and the rate of detours >= 100 us.
extra_stats() {
    local trace="$1" csv
    csv="$(mktemp --suffix=.csv)"
    "$jt" convert "$trace" -o "$csv" >/dev/null
    awk -F, 'NR > 1 {
            n++; run = $3 + 0; sleep = $4 + 0;
            if (sleep < 130000) s130++;
            if (run >= 10000 && run < 50000) mid++;
            if (run >= 100000) long++;
            if (run >= 500000) vlong++;
        }
        END {
            printf "extra statistics (all streams):\n";
            printf "  sleeps < 130 us:       %6.2f %% of detours\n", 100 * s130 / n;
            printf "  detours in 10-50 us:   %6.2f %% of detours\n", 100 * mid / n;
            printf "  detours >= 100 us:     %6d (%.4f %%)\n", long, 100 * long / n;
            printf "  detours >= 500 us:     %6d (%.4f %%)\n", vlong, 100 * vlong / n;
        }' "$csv"
    rm -f "$csv"
}

write_stats() {
    local name="$1"
    {
        "$jt" stats "$here/$name.jtr" --overhead 14us --scale 3,8,9
        echo
        extra_stats "$here/$name.jtr"
    } >"$here/$name.stats.txt"
    echo "== $name.jtr ($(stat -c %s "$here/$name.jtr") bytes)"
    cat "$here/$name.stats.txt"
}

# The specs: every component is justified in README.md from the text of paper 001.
# Runlevel 1 Fedora Core 5 on a 2.8 GHz Xeon, HZ = 250 (paper 001 §III-B).
RL1_SPEC="periodic:period=4ms,dur=lognormal:8us:0.2"          # 250 Hz timer tick, 5-14 us
RL1_SPEC+="+poisson:rate=210/s,dur=lognormal:8us:0.25"         # other interrupts, 5-14 us
RL1_SPEC+="+poisson:rate=135/s,dur=lognormal:2us:0.5"          # short detours, < 5 us (23 %)
RL1_SPEC+="+poisson:rate=8/s,dur=lognormal:22us:0.35"          # the 10-50 us population
RL1_SPEC+="+poisson:rate=1/s,dur=lognormal:500us:0.3"          # rare long: peak near 500 us
RL1_SPEC+="+poisson:rate=0.2/s,dur=lognormal:2ms:0.5"          # rarer, beyond 500 us
# Blue Gene/L I/O node, Linux 2.6.5 embedded (paper 001 §III-B, §IV-A).
BGL_SPEC="periodic:period=1ms,dur=lognormal:1690ns:0.06"       # 1000 Hz tick, 1.55-1.75 us peak
BGL_SPEC+="+poisson:rate=35/s,dur=lognormal:3us:0.3"           # other short interrupts, < 5 us
BGL_SPEC+="+poisson:rate=3.6/s,dur=lognormal:7us:0.4"          # the 0.5 % >= 5 us, few > 10 us

if [[ "$what" == synthetic || "$what" == all ]]; then
    "$jt" synth "$RL1_SPEC" --duration 120s --streams 1 --seed 1 -o "$here/synthetic-rl1.jtr"
    "$jt" synth "$BGL_SPEC" --duration 120s --streams 1 --seed 2 -o "$here/synthetic-bglio.jtr"
    write_stats synthetic-rl1
    write_stats synthetic-bglio
fi

real_wanted() { [[ "$what" == all || "$what" == real || "$what" == "$1" ]]; }
if [[ "$what" != synthetic && "$(nproc)" -lt 2 ]]; then
    echo "error: the real samples need at least 2 CPUs (the daemon runs on CPU 1)" >&2
    exit 1
fi
# The load average at the start of each collection goes into the header: on a shared machine
# other work shows up as detours.
labels() { echo "--label=loadavg_at_start=$(cut -d' ' -f1-3 /proc/loadavg)"; }

# 1. Every CPU, ordinary policy: what a normal process sees, including whatever else runs.
if real_wanted shared; then
    "$bin/jitter-collect" --duration 10s -q -o "$here/vm-shared-allcpus.jtr" \
        --label "config=all CPUs, SCHED_OTHER probe, no synthetic daemon" "$(labels)"
    write_stats vm-shared-allcpus
fi

# 2. CPU 1 only, probe at SCHED_FIFO 1: ordinary tasks no longer preempt it, so what is left is
#    interrupts, kernel threads, real-time tasks and the kernel's fair-server slice for ordinary
#    tasks. CPU 0 stays free for everything else.
if real_wanted fifo; then
    "$bin/jitter-collect" --cpus 1 --sched fifo --prio 1 --duration 10s -q \
        -o "$here/vm-fifo-cpu1.jtr" \
        --label "config=CPU 1, SCHED_FIFO 1 probe, no synthetic daemon" "$(labels)"
    write_stats vm-fifo-cpu1
fi

# 3. The same with the collector's synthetic daemon (`jitter-collect daemon`) on CPU 1: SCHED_FIFO 50 (above the
#    probe), waking every 10 ms on an absolute schedule and spinning 300 us, for 12 s around the
#    10 s collection (it calibrates its clock for 0.2 s first).
if real_wanted daemon; then
    "$bin/jitter-collect" daemon --cpu 1 --period 10ms --busy 300us -d 12s --rt 50 &
    daemon_pid=$!
    sleep 0.5
    "$bin/jitter-collect" --cpus 1 --sched fifo --prio 1 --duration 10s -q \
        -o "$here/vm-daemon-cpu1.jtr" \
        --label "config=CPU 1, SCHED_FIFO 1 probe; synthetic daemon on CPU 1: SCHED_FIFO 50, every 10 ms, spins 300 us" \
        "$(labels)"
    wait "$daemon_pid"
    write_stats vm-daemon-cpu1
fi
