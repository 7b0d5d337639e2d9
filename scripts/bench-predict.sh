#!/usr/bin/env bash
# Times `replay-bench predict` against the goals of issue 6 and prints one line per case with
# wall time, throughput (rank-phases/s) and peak RSS. `--criterion` also runs the criterion
# groups (cargo bench -p replay-bench --bench predict).
#
# Cases (realistic synthetic trace, q = 1 ms, sync none, 2 threads unless RAYON_NUM_THREADS):
#   des 2048 ranks x 10^4 phases   (goal <= 1 s)
#   des 65536 ranks x 10^3 phases  (goal <= 5 s)
#   order-stats 10^6 ranks         (goal <= 10 ms per evaluation)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p replay-bench --bench predict >&2
bin=$(cargo bench -p replay-bench --bench predict --no-run --message-format=json 2>/dev/null \
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
    cargo bench -p replay-bench --bench predict
fi
