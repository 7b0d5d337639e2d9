#!/usr/bin/env bash
# Times `replay-bench predict` against its goals (docs/BENCHMARKS.md) and prints one line per case with
# wall time, throughput (rank-phases/s) and peak RSS. `--criterion` also runs the criterion
# groups (cargo bench -p jitter-predict --bench predict).
#
# Cases (realistic synthetic trace, q = 1 ms, sync none, 2 threads unless RAYON_NUM_THREADS):
#   des 2048 ranks x 10^4 phases   (goal <= 1 s)
#   des 65536 ranks x 10^3 phases  (goal <= 5 s)
#   order-stats 10^6 ranks         (goal <= 10 ms per evaluation)
#
# `--ab OLD NEW [REPEATS]` instead alternates two builds on dense traces (15 s and 60 s at
# 10^5 detours/s), 2048 ranks x 10^4 phases, offloaded and dissemination barrier, and says
# whether their reports agree; its first case, 2048 ranks x 1 phase, times loading alone
# (reading the trace, its plan and index).
#
# `--density [REPEATS]` instead times the indexed engine at 2048 ranks x 10^4 phases (offloaded
# barrier, sync none, --timer abstime, 2 threads) on 15 s traces of 10^3, 10^4, 3*10^4 and 10^5
# detours/s, REPEATS runs each (default 3; loading and indexing included), beside one run of the
# walk at 10^3 phases on the same trace: ns per rank-phase of each (the walk's over its own
# phases, loading included) and their ratio, and the indexed run's peak memory.
#
# `--sizes [REPEATS]` instead asks whether the index's size sets the cost at 10^5 detours/s:
# 2048 ranks x up to 10^4 phases (offloaded barrier, sync none, --timer abstime, 2 threads) on
# traces of 2, 8 and 15 s (a short trace ends the run early: ms per phase, loading included),
# then 65 536 ranks x 300 phases on a 0.4 s trace (an index that fits in cache) against the
# 15 s one, REPEATS runs each (default 2), alternated.
#
# `--scaling [PROCS] [REPEATS]` instead runs 10^6 ranks x 200 phases of a 60 s trace at 10^4
# detours/s in one process with T threads and under `mpirun -np P` (P, T in PROCS, default
# "1 2"; REPEATS rounds, default 2), checks that every report is the same, and times 10^6 x
# 10^3, the dissemination barrier at 10^6 ranks, and 2048 x 10^4 at 10^5/s on two cores
# (the strong-scaling figure; MPIRUN names the launcher).
#
# `--matrix [REPEATS] BIN...` instead sets each engine (walk, indexed) x collective (offloaded,
# dissemination, recursive-doubling, binomial-tree) x density (the sparse 60 s trace,
# `periodic:period=4ms,dur=120us`, and its dense one, `+poisson:rate=20000/s,dur=exp:300ns`, seed
# 3) side by side for every given replay-bench binary: instructions per rank-phase with
# cachegrind (deterministic on any machine; 2048 ranks, (120 - 20 phases) so that loading and
# indexing drop out; sync none, q = 1 ms, one thread), then REPEATS rounds (default 3) of wall
# time at MATRIX_RANKS x MATRIX_PHASES (default 16384 x 200, two threads), every case once per
# round, interleaved; it prints each case's median and range and the ratios dense/sparse and
# collective/offloaded of each round (median, range). Ratios and counts are the figures a
# loaded machine leaves standing; the wall times go with their spread. MATRIX_ENGINES (default
# "walk indexed") picks the engines counted.
#
# JB_BIN_DIR=DIR in any mode takes jitter-trace and replay-bench from DIR instead of building.
#
# `--cachegrind BIN...` instead counts, for each given replay-bench binary (e.g. two builds to
# compare), instructions and data-cache misses per rank-phase of the indexed engine on a dense
# 6 s trace (10^5 detours/s), with valgrind's cachegrind and a 4 MiB last-level cache (so the
# trace's index does not fit, as a 60 s trace's does not fit a real 32 MiB L3): counts, not
# times, so a loaded machine does not change them. Per rank-phase = (220 phases - 20 phases)
# / (2048 ranks x 200), which removes loading and indexing.
set -euo pipefail
cd "$(dirname "$0")/.."

# The binaries every mode runs: built here, or, with JB_BIN_DIR set, taken from that folder
# (a machine without a Rust toolchain, e.g. a lent many-core box). Sets $jt and $rb.
binaries() {
    if [ -n "${JB_BIN_DIR:-}" ]; then
        jt=$JB_BIN_DIR/jitter-trace rb=$JB_BIN_DIR/replay-bench
        for b in "$jt" "$rb"; do
            [ -x "$b" ] || { echo "error: $b is missing (JB_BIN_DIR=$JB_BIN_DIR)" >&2; exit 1; }
        done
    else
        cargo build --release -q -p jitter-trace-tool -p replay-bench
        jt=target/release/jitter-trace rb=target/release/replay-bench
    fi
}

# The synthetic trace of every mode below: RATE detours/s of lognormal ~1 us plus a 250 Hz tick,
# one stream, seed 2 (needs binaries' $jt). Usage: dense_trace RATE SECONDS OUT
dense_trace() {
    "$jt" synth \
        "poisson:rate=$1/s,dur=lognormal:1us:0.5+periodic:period=4ms,dur=uniform:2us:4us,jitter=20us" \
        --duration "$2s" --streams 1 --seed 2 -o "$3" >/dev/null
}

# A scratch folder for the mode's traces and reports, removed on exit (sets $tmp).
scratch() {
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
}

# The line that heads a mode's table: time, CPU, cores and load.
machine() {
    echo "# $(date -u +%FT%H:%MZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
         "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
}

if [ "${1:-}" = "--cachegrind" ]; then
    shift
    [ $# -ge 1 ] || { echo "error: --cachegrind needs at least one replay-bench binary" >&2; exit 2; }
    command -v valgrind >/dev/null || { echo "error: valgrind is not installed (apt-get install -y valgrind)" >&2; exit 1; }
    scratch
    binaries
    dense_trace 100000 6 "$tmp/dense6.jtr"
    count() { # binary phases -> "instructions D1-misses LL-misses"
        timeout 1800 valgrind --tool=cachegrind --cache-sim=yes --LL=4194304,16,64 \
            --cachegrind-out-file=/dev/null "$1" predict --engine indexed --timer abstime \
            --model des --collective offloaded --force --trace "$tmp/dense6.jtr" --ranks 2048 \
            --phases "$2" --sync none \
            --threads 1 -o /dev/null 2>&1 \
            | awk '/I *refs:/ {gsub(",", "", $4); i=$4} /D1  misses:/ {gsub(",", "", $4); d=$4}
                   /LLd misses:/ {gsub(",", "", $4); l=$4} END {print i, d, l}'
    }
    echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); per rank-phase, dense 10^5/s, 2048 ranks"
    printf '%-40s %14s %14s %14s\n' binary instructions D1_misses LL_misses
    for bin in "$@"; do
        echo "counting $bin (two runs under valgrind, a few minutes)" >&2
        read -r i0 d0 l0 < <(count "$bin" 20)
        read -r i1 d1 l1 < <(count "$bin" 220)
        awk -v b="$bin" -v i="$((i1 - i0))" -v d="$((d1 - d0))" -v l="$((l1 - l0))" \
            'BEGIN {n = 2048 * 200; printf "%-40s %14.1f %14.2f %14.2f\n", b, i / n, d / n, l / n}'
    done
    exit 0
fi

if [ "${1:-}" = "--matrix" ]; then
    shift
    reps=3
    if [[ "${1:-}" =~ ^[0-9]+$ ]]; then reps=$1; shift; fi
    [ $# -ge 1 ] || { echo "error: --matrix needs at least one replay-bench binary" >&2; exit 2; }
    command -v valgrind >/dev/null || { echo "error: valgrind is not installed (apt-get install -y valgrind)" >&2; exit 1; }
    scratch
    binaries
    "$jt" synth 'periodic:period=4ms,dur=120us' --duration 60s --seed 3 -o "$tmp/sparse.jtr" >/dev/null
    "$jt" synth 'periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns' \
        --duration 60s --seed 3 -o "$tmp/dense.jtr" >/dev/null
    colls="offloaded dissemination recursive-doubling binomial-tree"
    args() { # engine collective density ranks phases threads: predict's arguments
        echo predict --engine "$1" --collective "$2" --trace "$tmp/$3.jtr" --ranks "$4" \
            --phases "$5" --sync none --quanta 1ms --force --threads "$6" -o /dev/null
    }
    instructions() { # binary engine collective density phases
        # shellcheck disable=SC2046
        timeout 1800 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
            "$1" $(args "$2" "$3" "$4" 2048 "$5" 1) 2>&1 >/dev/null \
            | awk '/I *refs:/ {gsub(",", "", $4); print $4}'
    }
    machine
    echo "# instructions per rank-phase (cachegrind; 2048 ranks, 120 - 20 phases, sync none, one thread)"
    printf '%-32s %-8s %-20s %-7s %14s\n' binary engine collective density instr/rank-phase
    for bin in "$@"; do for eng in ${MATRIX_ENGINES:-walk indexed}; do for c in $colls; do for d in sparse dense; do
        i0=$(instructions "$bin" $eng $c $d 20)
        i1=$(instructions "$bin" $eng $c $d 120)
        awk -v b="$bin" -v e=$eng -v c=$c -v d=$d -v i="$((i1 - i0))" \
            'BEGIN {printf "%-32s %-8s %-20s %-7s %14.1f\n", b, e, c, d, i / (2048 * 100)}'
    done; done; done; done
    ranks=${MATRIX_RANKS:-16384} phases=${MATRIX_PHASES:-200}
    echo "# wall s, $ranks ranks x $phases phases, two threads, $reps interleaved rounds"
    for r in $(seq "$reps"); do for bin in "$@"; do for c in $colls; do for d in sparse dense; do
        # shellcheck disable=SC2046
        w=$({ /usr/bin/time -f %e "$bin" $(args indexed $c $d "$ranks" "$phases" 2) >/dev/null; } 2>&1 | tail -1)
        echo "$r $bin $c $d $w"
    done; done; done; done >"$tmp/walls"
    awk -v bins="$*" '
        { w[$2, $3, $4, $1] = $5; rounds[$1] = 1 }
        function stats(v, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
            if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            return sprintf("%8.3f [%.3f, %.3f]", v[int((n + 1) / 2)], v[1], v[n]) }
        END {
            nb = split(bins, B, " "); nc = split("offloaded dissemination recursive-doubling binomial-tree", C, " ")
            printf "%-32s %-20s %-26s %-26s %-26s %-26s\n", "binary", "collective", "sparse_s", "dense_s", "dense/sparse", "coll/offloaded(dense)"
            for (b = 1; b <= nb; b++) for (c = 1; c <= nc; c++) {
                n = 0; for (r in rounds) { n++; s[n] = w[B[b], C[c], "sparse", r]; d[n] = w[B[b], C[c], "dense", r]
                    q[n] = d[n] / s[n]; o[n] = d[n] / w[B[b], "offloaded", "dense", r] }
                printf "%-32s %-20s %-26s %-26s %-26s %-26s\n", B[b], C[c], stats(s, n), stats(d, n), stats(q, n), stats(o, n)
            }
        }' "$tmp/walls"
    exit 0
fi

if [ "${1:-}" = "--density" ]; then
    reps=${2:-3}
    scratch
    binaries
    machine
    printf '%-10s %-24s %8s %-20s %10s %12s %8s\n' rate indexed_wall_s mib indexed_ns/rank-phase \
        walk_wall_s walk_ns/r-p ratio
    for rate in 1000 10000 30000 100000; do
        echo "synthesising 15 s at $rate detours/s" >&2
        dense_trace "$rate" 15 "$tmp/t.jtr"
        run() { # engine phases -> "wall_s peak_kib"
            { timeout 900 /usr/bin/time -f "%e %M" "$rb" predict --engine "$1" --timer abstime \
                --model des --force --collective offloaded --trace "$tmp/t.jtr" --ranks 2048 \
                --phases "$2" --sync none --threads 2 -o "$tmp/$1.json" >/dev/null; } 2>&1 | tail -1
        }
        walls=() kib=0
        for rep in $(seq "$reps"); do
            echo "  indexed run $rep" >&2
            read -r w k < <(run indexed 10000)
            walls+=("$w") kib=$k
        done
        echo "  walk, 10^3 phases" >&2
        read -r ww _ < <(run walk 1000)
        best=$(printf '%s\n' "${walls[@]}" | sort -n | head -1)
        awk -v r="$rate" -v ws="${walls[*]}" -v k="$kib" -v b="$best" -v ww="$ww" 'BEGIN {
            ni = b * 1e9 / (2048 * 10000); nw = ww * 1e9 / (2048 * 1000);
            printf "%-10s %-24s %8d %-20.1f %10.2f %12.1f %8.1f\n", r, ws, k / 1024, ni, ww, nw, nw / ni }'
    done
    exit 0
fi

if [ "${1:-}" = "--sizes" ]; then
    reps=${2:-2}
    scratch
    binaries
    for d in 0.4 2 8 15; do
        echo "synthesising ${d} s at 10^5 detours/s" >&2
        dense_trace 100000 "$d" "$tmp/t$d.jtr"
    done
    machine
    run() { # trace_seconds ranks phases -> "wall_s peak_kib phases_run"
        local out
        out=$({ timeout 900 /usr/bin/time -f "%e %M" "$rb" predict --timer abstime --model des \
            --force --collective offloaded --trace "$tmp/t$1.jtr" --ranks "$2" --phases "$3" \
            --sync none --threads 2 -o "$tmp/r.json" >/dev/null; } 2>&1)
        # A rank that reaches f = 1 stops the run: "… after P of N phases".
        local ran
        ran=$(sed -n 's/.*after \([0-9]*\) of [0-9]* phases.*/\1/p' <<<"$out" | head -1)
        echo "$(tail -1 <<<"$out") ${ran:-$3}"
    }
    printf '%-8s %-8s %-8s %8s %10s %12s\n' trace_s ranks phases wall_s peak_mib ms/phase
    for rep in $(seq "$reps"); do
        for d in 2 8 15; do
            read -r w k p < <(run "$d" 2048 10000)
            awk -v d="$d" -v w="$w" -v k="$k" -v p="$p" \
                'BEGIN { printf "%-8s %-8s %-8s %8.2f %10d %12.3f\n", d, 2048, p, w, k / 1024, w * 1e3 / p }'
        done
    done
    for rep in $(seq "$reps"); do
        for d in 0.4 15; do
            read -r w k p < <(run "$d" 65536 300)
            awk -v d="$d" -v w="$w" -v k="$k" -v p="$p" \
                'BEGIN { printf "%-8s %-8s %-8s %8.2f %10d %12.3f\n", d, 65536, p, w, k / 1024, w * 1e3 / p }'
        done
    done
    exit 0
fi

if [ "${1:-}" = "--scaling" ]; then
    # Strong scaling of one job, 10^6 ranks x 200 phases of real10k (60 s, 4 streams, 10^4/s),
    # offloaded barrier, sync none, --timer abstime: one process with T threads on cores
    # 0..T-1, then `mpirun -np P --threads 1` bound to cores; wall, peak per process, and
    # whether each report equals the first's. Then 10^6 x 10^3 (the issue's goal) once at the
    # largest count, dissemination 10^6 x 20 at 1 and at the largest count (s per phase), and
    # 2048 x 10^4 on a 15 s trace of 10^5 detours/s held to two cores (taskset -c 0,1).
    procs=${2:-"1 2"} reps=${3:-2}
    top=${procs##* }
    [ "$top" -le "$(nproc)" ] || { echo "error: $top processes > $(nproc) cores" >&2; exit 2; }
    scratch
    binaries
    mpirun=("${MPIRUN:-mpirun}" --bind-to core)
    [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
    echo "synthesising real10k (60 s, 4 streams) and a 15 s trace at 10^5 detours/s" >&2
    "$jt" synth 'periodic:period=4ms,dur=uniform:2us:4us,jitter=20us+poisson:rate=10000/s,dur=lognormal:2us:0.5+poisson:rate=2/s,dur=exp:200us' \
        --duration 60s --streams 4 --seed 1 -o "$tmp/real10k.jtr" >/dev/null
    dense_trace 100000 15 "$tmp/dense15.jtr"
    machine
    job=(predict --engine indexed --timer abstime --model des --force --collective offloaded
         --sync none --trace "$tmp/real10k.jtr" --ranks 1000000)
    same() { # report -> equal/differ against the first report of its kind ($1.first)
        [ -f "$1.first" ] || { cp "$1" "$1.first"; echo first; return; }
        cmp -s <(grep -v '"created_unix_s"' "$1.first") <(grep -v '"created_unix_s"' "$1") \
            && echo equal || echo differ
    }
    timed() { # label out-stem command... -> one row: label wall_s peak_mib_per_process report
        local label=$1 stem=$2 t
        shift 2
        echo "$label" >&2
        t=$( { timeout 600 /usr/bin/time -f "%e %M" "$@" -o "$tmp/$stem.json" >/dev/null; } 2>&1 | tail -1)
        read -r w k <<<"$t"
        printf '%-34s %8s %10s %s\n' "$label" "$w" "$((k / 1024))" "$(same "$tmp/$stem.json")"
    }
    printf '%-34s %8s %10s %s\n' case wall_s peak_mib report
    for rep in $(seq "$reps"); do
        for p in $procs; do
            timed "10^6x200 1 process, $p threads" s200 taskset -c "0-$((p - 1))" "$rb" "${job[@]}" \
                --phases 200 --threads "$p"
        done
        for p in $procs; do
            timed "10^6x200 mpirun -np $p, 1 thread" s200 "${mpirun[@]}" -np "$p" "$rb" "${job[@]}" \
                --phases 200 --threads 1
        done
    done
    timed "10^6x1000 mpirun -np $top" s1000 "${mpirun[@]}" -np "$top" "$rb" "${job[@]}" \
        --phases 1000 --threads 1
    dis=(predict --engine indexed --timer abstime --model des --force --collective dissemination
         --sync none --trace "$tmp/real10k.jtr" --ranks 1000000 --phases 20)
    timed "dissem. 10^6x20 1 process, 1 thread" dis taskset -c 0 "$rb" "${dis[@]}" --threads 1
    timed "dissem. 10^6x20 1 process, $top thr." dis taskset -c "0-$((top - 1))" "$rb" "${dis[@]}" \
        --threads "$top"
    timed "dissem. 10^6x20 mpirun -np $top" dis "${mpirun[@]}" -np "$top" "$rb" "${dis[@]}" --threads 1
    for rep in $(seq 3); do
        timed "dense15 2048x10^4, 2 cores" dense taskset -c 0,1 "$rb" predict --engine indexed \
            --timer abstime --model des --force --collective offloaded --sync none \
            --trace "$tmp/dense15.jtr" --ranks 2048 --phases 10000 --threads 2
    done
    exit 0
fi

if [ "${1:-}" = "--ab" ]; then
    # Two replay-bench builds alternated on the same dense traces (10^5 detours/s, 15 s and
    # 60 s), 2048 ranks x 10^4 phases, 2 threads, offloaded and the default (dissemination)
    # barrier, sync none and the default modes (none,once,phase): wall and user seconds of
    # each run, and whether the two builds' reports agree (all fields but created_unix_s).
    shift
    [ $# -ge 2 ] || { echo "usage: scripts/bench-predict.sh --ab OLD_BIN NEW_BIN [REPEATS]" >&2; exit 2; }
    old=$1 new=$2 reps=${3:-3}
    command -v jq >/dev/null || { echo "error: jq is not installed (apt-get install -y jq)" >&2; exit 1; }
    scratch
    binaries
    for d in 15 60; do
        echo "synthesising a ${d} s trace at 10^5 detours/s" >&2
        dense_trace 100000 "$d" "$tmp/dense$d.jtr"
    done
    machine
    printf '%-8s %-14s %-16s %-6s %-6s %-4s %8s %8s %s\n' trace collective sync phases build \
        rep wall_s user_s reports
    for case in dense15:offloaded:none:1 dense15:offloaded:none dense60:offloaded:none \
                dense15:dissemination:none dense15:offloaded:none,once,phase \
                dense15:dissemination:none,once,phase; do
        IFS=: read -r trace coll sync phases <<<"$case"
        phases=${phases:-10000}
        for rep in $(seq "$reps"); do
            for which in old new; do
                bin=$old
                [ "$which" = new ] && bin=$new
                echo "$case $which $rep" >&2
                t=$( { timeout 600 /usr/bin/time -f "%e %U" "$bin" predict --engine indexed \
                    --timer abstime --model des --force --trace "$tmp/$trace.jtr" \
                    --ranks 2048 --phases "$phases" --sync "$sync" --threads 2 \
                    --collective "$coll" -o "$tmp/$which.json" >/dev/null; } 2>&1 | tail -1)
                same=-
                if [ "$which" = new ]; then
                    same=differ
                    cmp -s <(jq -S 'del(.created_unix_s)' "$tmp/old.json") \
                        <(jq -S 'del(.created_unix_s)' "$tmp/new.json") && same=equal
                fi
                printf '%-8s %-14s %-16s %-6s %-6s %-4s %8s %8s %s\n' "$trace" "$coll" "$sync" \
                    "$phases" "$which" "$rep" $t "$same"
            done
        done
    done
    exit 0
fi

cargo build --release -p jitter-predict --bench predict >&2
bin=$(cargo bench -p jitter-predict --bench predict --no-run --message-format=json 2>/dev/null \
    | grep '"kind":\["bench"\]' | grep '"name":"predict"' \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "error: cannot find the predict bench binary" >&2; exit 1; }

echo "# $(date -u +%F) $(uname -n) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for spec in des:2048:10000:none des:2048:10000:phase des:65536:1000:none des:65536:1000:phase \
            order-stats:1000000; do
    rss=$( { PREDICT_ONCE=$spec /usr/bin/time -f "%M" "$bin" >/tmp/bench-predict.$$ ; } 2>&1 )
    echo "$(cat /tmp/bench-predict.$$) peak_rss_mib=$((rss / 1024))"
done
rm -f /tmp/bench-predict.$$

if [ "${1:-}" = "--criterion" ]; then
    cargo bench -p jitter-predict --bench predict
fi
