#!/usr/bin/env bash
# The cost of `replay-bench predict --app` beside the loop on the same trace (the goal:
# "--app at 10^6 ranks x 10^3 iterations costs no more than 3x the loop").
#
#   scripts/bench-predict-app.sh --cachegrind PROFILE BIN...
#       Instructions per rank-iteration (valgrind cachegrind, --cache-sim=no: counts, not
#       times, so a loaded machine does not change them) at 16 384 ranks, sync none, one thread:
#       (count at 50 iterations - count at 10) / (40 x 16 384), which removes loading and
#       indexing; the loop (`--quanta` = the profile's sum of compute means, its default shape
#       and dissemination barriers) with the first BIN, then `--app PROFILE` with every BIN.
#   scripts/bench-predict-app.sh --time PROFILE BIN...
#       User CPU seconds and peak RSS under /usr/bin/time, the loop (first BIN) and the app (each
#       BIN) alternately (loop, app, ..., loop, app, ...; ROUNDS rounds, default 2) at RANKS x
#       ITERATIONS (default 262144 x 200), one thread, nice -n 10.
#
# The trace is `periodic:period=4ms,dur=200us` (5 %), 120 s, one stream (written to $TMPDIR).
# QUANTA (required) is the loop's q: the profile's sum of compute means (its `jitter-profile`
# summary; 1083us for the halo profile of check-app-reports.sh). JT names jitter-trace (default: the release build).
set -euo pipefail
mode=${1:-} profile=${2:-}
[ -n "$mode" ] && [ -f "$profile" ] || {
    echo "usage: $0 --cachegrind|--time PROFILE BIN..." >&2
    exit 2
}
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jt=${JT:-$(dirname "$0")/../target/release/jitter-trace}
"$jt" synth 'periodic:period=4ms,dur=200us' --duration 120s -o "$tmp/p.jtr" >/dev/null
quanta=${QUANTA:?set QUANTA to the profile\'s sum of compute means, e.g. 1083us}
base=(predict --trace "$tmp/p.jtr" --sync none --threads 1 --seed 1)

count() { # BIN RANKS PHASES ARGS... -> instructions
    local bin=$1 n=$2 ph=$3
    shift 3
    timeout 1200 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        "$bin" "${base[@]}" --ranks "$n" --phases "$ph" "$@" -o "$tmp/r.json" 2>&1 \
        | awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
}
per() { # BIN ARGS... -> instructions per rank-iteration
    local a b
    a=$(count "$1" 16384 10 "${@:2}")
    b=$(count "$1" 16384 50 "${@:2}")
    echo "$a $b" | awk '{ printf "%.0f (10: %.0f, 50: %.0f)", ($2 - $1) / (40 * 16384), $1, $2 }'
}

case $mode in
--cachegrind)
    loop=$(per "$1" --quanta "$quanta")
    echo "loop ($1): $loop instructions per rank-iteration"
    lp=${loop%% *}
    for bin in "$@"; do
        app=$(per "$bin" --app "$profile")
        echo "app ($bin): $app instructions per rank-iteration, $(echo "${app%% *} $lp" | awk '{ printf "%.2f", $1 / $2 }')x the loop"
    done
    ;;
--time)
    n=${RANKS:-262144} ph=${ITERATIONS:-200}
    for r in $(seq "${ROUNDS:-2}"); do
        for what in loop "$@"; do
            if [ "$what" = loop ]; then
                bin=$1 args=(--quanta "$quanta")
            else
                bin=$what args=(--app "$profile")
            fi
            /usr/bin/time -f "%U %M" -o "$tmp/t" nice -n 10 timeout 1200 \
                "$bin" "${base[@]}" --ranks "$n" --phases "$ph" "${args[@]}" -o "$tmp/r.json" >/dev/null 2>&1
            read -r user rss <"$tmp/t"
            echo "round $r $what: user ${user} s, peak RSS $((rss / 1024)) MiB ($n ranks x $ph)"
        done
    done
    ;;
*)
    echo "error: unknown mode $mode" >&2
    exit 2
    ;;
esac
