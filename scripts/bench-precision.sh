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
set -euo pipefail
bin=$(cd "${1:?usage: $0 BIN_DIR [PRECISIONS [RANKS [COLLECTIVES [TRACES]]]]}" && pwd)
precisions=${2:-"2% 1%"}
ranks=${3:-"1024 4096 16384 65536 262144 1048576"}
collectives=${4:-"offloaded dissemination recursive-doubling binomial-tree"}
traces=${5:-"sparse dense"}
command -v jq >/dev/null || { echo "error: jq is not installed" >&2; exit 1; }
dir=${JB_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ -f "$dir/sparse.jtr" ] || "$bin/jitter-trace" synth 'periodic:period=4ms,dur=120us' \
    --duration 60s --seed 3 -o "$dir/sparse.jtr" >/dev/null
[ -f "$dir/dense.jtr" ] || "$bin/jitter-trace" synth \
    'periodic:period=4ms,dur=120us+poisson:rate=20000/s,dur=exp:300ns' --duration 60s --seed 3 \
    -o "$dir/dense.jtr" >/dev/null
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
