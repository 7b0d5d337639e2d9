#!/usr/bin/env bash
# Records ~30 `replay-bench predict` JSON reports with one binary, so that a change to the
# predictor's speed can be checked to leave every report byte-identical (the house rule "faster
# never means different"): run it with the old binary into one folder, with the new into another,
# then `--compare OLD_DIR NEW_DIR` (every field but `created_unix_s`).
#
# Usage: scripts/record-predict-reports.sh BIN DIR        record BIN's reports into DIR
#        scripts/record-predict-reports.sh --compare A B  compare two folders' reports
#
# Cases, on the sparse (`periodic:period=4ms,dur=120us`) and dense (`+poisson:rate=
# 20000/s,dur=exp:300ns`) traces, 10 s, seed 3: every --collective at 64, 1000 and 4099 ranks x
# 60 phases, --sync none,phase,every:7, on the default platform and with `--timer itimer` (timer
# errors: the walk); the default collective with --draws 3; the walk engine at 37 and 256 ranks
# (dissemination, binomial tree); compute-allreduce; compute-barrier with the binomial tree;
# dissemination with o = 50 ns, l = 2 us and with o = 0; three runs under `mpirun -np 2`
# (default collective, binomial tree, recursive doubling) and one under `-np 3` (default).
# JITTER_TRACE_BIN names jitter-trace (default: next to BIN, else target/release/jitter-trace);
# MPIRUN the launcher.
set -euo pipefail

if [ "${1:-}" = "--compare" ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --compare OLD_DIR NEW_DIR" >&2; exit 2; }
    command -v jq >/dev/null || { echo "error: jq is not installed (apt-get install -y jq)" >&2; exit 1; }
    # A report of a binary from before predictions carried 95 % intervals lacks their fields
    # (sd_qtbt_ci95_pct, sd_qt_ci95_pct, interval); against such a report the newer one is
    # compared without them, and counted apart: every other field must still be equal.
    added='del(.results[]? | select(.interval != null) | .sd_qtbt_ci95_pct, .sd_qt_ci95_pct, .interval)'
    differ=0 count=0 intervals=0
    for a in "$2"/*.json; do
        b="$3/$(basename "$a")"
        count=$((count + 1))
        if [ ! -f "$b" ]; then
            echo "missing: $b"
            differ=$((differ + 1))
        elif ! cmp -s <(jq -S 'del(.created_unix_s)' "$a") <(jq -S 'del(.created_unix_s)' "$b"); then
            if [ "$(jq '[.results[]? | select(.interval != null)] | length' "$a")" = 0 ] \
                && cmp -s <(jq -S "del(.created_unix_s) | $added" "$a") \
                    <(jq -S "del(.created_unix_s) | $added" "$b"); then
                intervals=$((intervals + 1))
            else
                echo "differ: $(basename "$a")"
                differ=$((differ + 1))
            fi
        fi
    done
    echo "$count reports compared, $differ differ ($intervals equal but for the 95 % intervals the newer adds)"
    [ "$differ" -eq 0 ]
    exit
fi

[ $# -eq 2 ] || { echo "usage: $0 BIN DIR | --compare OLD_DIR NEW_DIR" >&2; exit 2; }
rb=$(realpath "$1") dir=$2
[ -x "$rb" ] || { echo "error: $rb is not an executable" >&2; exit 1; }
jt=${JITTER_TRACE_BIN:-$(dirname "$rb")/jitter-trace}
[ -x "$jt" ] || jt=$(dirname "$0")/../target/release/jitter-trace
[ -x "$jt" ] || { echo "error: no jitter-trace binary (set JITTER_TRACE_BIN)" >&2; exit 1; }
mkdir -p "$dir/traces"
jt=$(realpath "$jt")
# Paths in the reports are relative (the traces' folder inside DIR), so two folders compare.
cd "$dir"
dir=. traces=traces
[ -f "$traces/sparse.jtr" ] || "$jt" synth 'periodic:period=4ms,dur=120us' --duration 10s \
    --seed 3 -o "$traces/sparse.jtr" >/dev/null
[ -f "$traces/dense.jtr" ] || "$jt" synth \
    'periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns' --duration 10s --seed 3 \
    -o "$traces/dense.jtr" >/dev/null

mpirun=("${MPIRUN:-mpirun}")
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)

# One report: NAME, then predict's arguments beyond the common ones.
case_() {
    local name=$1
    shift
    echo "$name" >&2
    timeout 600 "$rb" predict --force --quanta 1ms "$@" -o "$dir/$name.json" >/dev/null
}

table=(--ranks 64,1000,4099 --phases 60 --sync none,phase,every:7)
for d in sparse dense; do
    t=(--trace "$traces/$d.jtr")
    for c in offloaded dissemination recursive-doubling binomial-tree; do
        case_ "$d-$c" "${t[@]}" "${table[@]}" --collective "$c"
        case_ "$d-$c-itimer" "${t[@]}" "${table[@]}" --collective "$c" --timer itimer
    done
    case_ "$d-draws3" "${t[@]}" --ranks 64,1000 --phases 60 --sync none,phase --draws 3
    for c in dissemination binomial-tree; do
        case_ "$d-walk-$c" "${t[@]}" --ranks 37,256 --phases 60 --sync none,every:7 \
            --engine walk --collective "$c"
    done
    case_ "$d-allreduce" "${t[@]}" "${table[@]}" --loop-shape compute-allreduce
done
d=(--trace "$traces/dense.jtr")
case_ dense-compute-barrier-binomial "${d[@]}" "${table[@]}" --loop-shape compute-barrier \
    --collective binomial-tree
case_ dense-logp-50-2000 "${d[@]}" "${table[@]}" --collective dissemination --logp-o-ns 50 \
    --logp-l-ns 2000
case_ dense-logp-o0 "${d[@]}" "${table[@]}" --collective dissemination --logp-o-ns 0
for c in dissemination binomial-tree recursive-doubling; do
    echo "dense-mpi2-$c" >&2
    timeout 600 "${mpirun[@]}" -np 2 "$rb" predict --force --quanta 1ms "${d[@]}" \
        --ranks 1000,4099 --phases 60 --sync none,every:7 --collective "$c" --threads 1 \
        -o "$dir/dense-mpi2-$c.json" >/dev/null
done
# Three processes: blocks of unequal size whose boundaries no power of two aligns.
echo "dense-mpi3-dissemination" >&2
timeout 600 "${mpirun[@]}" --oversubscribe -np 3 "$rb" predict --force --quanta 1ms "${d[@]}" \
    --ranks 1000,4099 --phases 60 --sync none,every:7 --threads 1 \
    -o "$dir/dense-mpi3-dissemination.json" >/dev/null
echo "$(find . -maxdepth 1 -name '*.json' | wc -l) reports in $(pwd)" >&2
