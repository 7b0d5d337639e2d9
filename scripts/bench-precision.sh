#!/usr/bin/env bash
# Time to a precision: `replay-bench predict --precision P` (the precision mode) on the
# sparse (`periodic:period=4ms,dur=120us`) and dense (`+poisson:rate=20000/s,dur=exp:300ns`)
# 60 s traces (seed 3), sync none, q = 1 ms, at each rank count and collective; one line per run
# (wall and CPU seconds, peak RSS, the load average before it, draws, phases per draw, SD eq. 2
# with its half-width, and why the point stopped), as a markdown table on stdout.
#
# Usage: scripts/bench-precision.sh BIN_DIR [PRECISIONS [RANKS [COLLECTIVES [TRACES]]]]
#   PRECISIONS  space-separated (default "2% 1%"); RANKS (default 2^10 2^12 … 2^20);
#   COLLECTIVES (default "offloaded dissemination recursive-doubling binomial-tree");
#   TRACES "sparse dense". JB_BENCH_DIR keeps the traces and reports (default a temp folder).
#
#        scripts/bench-precision.sh --million BIN_DIR [ROUNDS]
#   The default `predict` (no --collective, no --timer) of 10^6 ranks of the dense trace, sync
#   none: ± 2 % in one process, ± 2 % under `mpirun -np 2` (MPIRUN names the launcher), ± 1 %,
#   and the demo's prediction step (16 … 65 536 ranks × none, once, phase, `--precision
#   2%,0.1pp --max-time 45s`, on a 20 s trace of the VALIDATION "realistic" spec), each ROUNDS
#   times (default 1), interleaved: wall and CPU seconds, peak RSS per process, the load
#   average before, the draws, the estimate said once the first draws were measured and the
#   time the mode says it took; the reports of a case must all be equal (checked).
#
#        scripts/bench-precision.sh --instructions BIN_DIR [RANKS [COLLECTIVES [TRACES]]]
#   Instructions (valgrind's cachegrind, no cache simulation: a count, whatever the load) of one
#   draw's work, `--phases P --draws 1 --threads 1` for P = 1, 2, 3 at RANKS ranks (default
#   65536), per trace and collective: a steady rank-phase (the 3-phase run less the 2-phase one,
#   per rank) and a draw's set-up with its first phase (the 1-phase run less the trace's loading,
#   measured at 1 rank, per rank), as a markdown table on stdout.
set -euo pipefail
synth_traces() {
    [ -f "$1/sparse.jtr" ] || "$2/jitter-trace" synth 'periodic:period=4ms,dur=120us' \
        --duration 60s --seed 3 -o "$1/sparse.jtr" >/dev/null
    [ -f "$1/dense.jtr" ] || "$2/jitter-trace" synth \
        'periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns' --duration 60s \
        --seed 3 -o "$1/dense.jtr" >/dev/null
}
if [ "${1:-}" = "--million" ]; then
    bin=$(cd "${2:?usage: $0 --million BIN_DIR [ROUNDS]}" && pwd)
    rounds=${3:-1}
    command -v jq >/dev/null || { echo "error: jq is not installed" >&2; exit 1; }
    dir=${JB_BENCH_DIR:-$(mktemp -d)}
    mkdir -p "$dir"
    synth_traces "$dir" "$bin"
    [ -f "$dir/realistic.jtr" ] || "$bin/jitter-trace" synth \
        'periodic:period=4ms,dur=uniform:2us:4us,jitter=20us+poisson:rate=300/s,dur=lognormal:5us:0.8+poisson:rate=2/s,dur=exp:200us' \
        --duration 20s --seed 3 -o "$dir/realistic.jtr" >/dev/null
    mpirun=("${MPIRUN:-mpirun}")
    [ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
    million=(--trace "$dir/dense.jtr" --ranks 1000000 --sync none --quanta 1ms --force)
    echo "| case | round | wall s | CPU s | MiB | load | draws | SD eq.2 | estimate s | took s |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for r in $(seq 1 "$rounds"); do
        for c in d2 np2 d1 demo; do
            out="$dir/$c-$r"
            case $c in
                d2) cmd=("$bin/replay-bench" predict "${million[@]}" --precision 2%) ;;
                np2) cmd=("${mpirun[@]}" -np 2 "$bin/replay-bench" predict "${million[@]}" \
                    --precision 2%) ;;
                d1) cmd=("$bin/replay-bench" predict "${million[@]}" --precision 1%) ;;
                demo) cmd=("$bin/replay-bench" predict --trace "$dir/realistic.jtr" \
                    --ranks 16..65536 --sync none,once,phase --quanta 1ms \
                    --precision 2%,0.1pp --max-time 45s --model des --seed 1 --timer abstime) ;;
            esac
            load=$(cut -d' ' -f1 /proc/loadavg)
            # %M is the largest process's peak (mpirun's children: the largest rank's).
            /usr/bin/time -o "$out.time" -f '%e %U %S %M' timeout 900 "${cmd[@]}" -o "$out.json" \
                >/dev/null 2>"$out.err" || true
            read -r wall user sys rss < <(tail -1 "$out.time")
            cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
            draws=$(jq '[.results[].interval.draws] | add' "$out.json" 2>/dev/null || echo -)
            sd=$(jq -r '.results | max_by(.ranks) | "\(.sd_qtbt_pct * 100 | round / 100) % ± \(.sd_qtbt_ci95_pct * 100 | round / 100)"' "$out.json" 2>/dev/null || echo failed)
            est=$(tr '\r' '\n' <"$out.err" | sed -n 's/.*is estimated at about \([0-9]*\) s in all.*/\1/p' | head -1)
            took=$(tr '\r' '\n' <"$out.err" | sed -n 's/.* draws in \([0-9.]*\) s.*/\1/p' | tail -1)
            echo "| $c | $r | $wall | $cpu | $((rss / 1024)) | $load | $draws | $sd | ${est:--} | ${took:--} |"
        done
    done
    for c in d2 np2 d1 demo; do
        for r in $(seq 2 "$rounds"); do
            cmp -s <(jq -S 'del(.created_unix_s)' "$dir/$c-1.json") \
                <(jq -S 'del(.created_unix_s)' "$dir/$c-$r.json") \
                || echo "reports differ: $c round $r" >&2
        done
    done
    cmp -s <(jq -S 'del(.created_unix_s)' "$dir/d2-1.json") \
        <(jq -S 'del(.created_unix_s)' "$dir/np2-1.json") \
        || echo "reports differ: one process and mpirun -np 2" >&2
    exit 0
fi
if [ "${1:-}" = --instructions ]; then
    bin=$(cd "${2:?usage: $0 --instructions BIN_DIR [RANKS [COLLECTIVES [TRACES]]]}" && pwd)
    n=${3:-65536}
    collectives=${4:-"offloaded dissemination recursive-doubling binomial-tree"}
    traces=${5:-"sparse dense"}
    command -v valgrind >/dev/null || { echo "error: valgrind is not installed" >&2; exit 1; }
    dir=${JB_BENCH_DIR:-$(mktemp -d)}
    mkdir -p "$dir"
    synth_traces "$dir" "$bin"
    # ir RANKS PHASES TRACE COLLECTIVE: the run's total instructions (cachegrind's summary line).
    ir() {
        local f="$dir/ir-$3-$4-$1-$2"
        timeout 3600 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$f.cg" \
            "$bin/replay-bench" predict --trace "$dir/$3.jtr" --ranks "$1" --sync none \
            --quanta 1ms --collective "$4" --phases "$2" --draws 1 --threads 1 --force \
            -o "$f.json" >/dev/null 2>"$f.err" || { echo "failed: see $f.err" >&2; echo 0; return; }
        sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$f.cg"
    }
    echo "| trace | collective | ranks | Ir, 1 rank × 2 phases (loading) | Ir per steady rank-phase | Ir per rank, set-up + first phase |"
    echo "|---|---|---|---|---|---|"
    for t in $traces; do
        for c in $collectives; do
            i0=$(ir 1 2 "$t" "$c") i1=$(ir "$n" 1 "$t" "$c") i2=$(ir "$n" 2 "$t" "$c")
            i3=$(ir "$n" 3 "$t" "$c")
            awk -v t="$t" -v c="$c" -v n="$n" -v a="$i0" -v b="$i1" -v d="$i2" -v e="$i3" \
                'BEGIN { printf "| %s | %s | %d | %.3f·10⁹ | %.0f | %.0f |\n", t, c, n, a / 1e9,
                         (e - d) / n, (b - a) / n }'
        done
    done
    exit 0
fi
bin=$(cd "${1:?usage: $0 BIN_DIR [PRECISIONS [RANKS [COLLECTIVES [TRACES]]]]}" && pwd)
precisions=${2:-"2% 1%"}
ranks=${3:-"1024 4096 16384 65536 262144 1048576"}
collectives=${4:-"offloaded dissemination recursive-doubling binomial-tree"}
traces=${5:-"sparse dense"}
command -v jq >/dev/null || { echo "error: jq is not installed" >&2; exit 1; }
dir=${JB_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
synth_traces "$dir" "$bin"
echo "| trace | collective | precision | ranks | wall s | CPU s | MiB | load | draws | phases/draw | SD eq.2 | stopped |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for t in $traces; do
    for c in $collectives; do
        for p in $precisions; do
            for n in $ranks; do
                load=$(cut -d' ' -f1 /proc/loadavg)
                out="$dir/$t-$c-${p%\%}-$n.json"
                /usr/bin/time -o "$out.time" -f '%e %U %S %M' timeout 900 "$bin/replay-bench" \
                    predict --trace "$dir/$t.jtr" --ranks "$n" --sync none --quanta 1ms \
                    --collective "$c" --precision "$p" --force -o "$out" >/dev/null \
                    2>"$out.err" || true
                read -r wall user sys rss < <(tail -1 "$out.time")
                row=$(jq -r '.results[0] | "\(.interval.draws) | \(.interval.phases_per_draw) | \(.sd_qtbt_pct * 100 | round / 100) % ± \(.sd_qtbt_ci95_pct * 100 | round / 100) | \(.interval.stopped_by)"' "$out" 2>/dev/null || echo "- | - | failed | -")
                cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
                echo "| $t | $c | $p | $n | $wall | $cpu | $((rss / 1024)) | $load | $row |"
            done
        done
    done
done
