#!/usr/bin/env bash
# Side-by-side check of jitter-collect's default detection against osjitter (paper 003) at its
# default 100 ns threshold: interleaved rounds on the same CPU, order alternating, each tool's
# detours/s and noise ratio, their ratios, and whether they agree within x2 (rate) and x1.6 (noise
# ratio). osjitter is not part of this project: build it yourself outside the tree and pass its
# binary. Usage:
#   scripts/compare-osjitter.sh --osjitter PATH [--cpu N] [--seconds S] [--rounds R] [--bin-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

osj="" cpu=1 seconds=5 rounds=6 bin_dir=target/release
while [ $# -gt 0 ]; do
    case "$1" in
        --osjitter) osj=${2:?--osjitter needs a path}; shift ;;
        --cpu) cpu=${2:?--cpu needs a number}; shift ;;
        --seconds) seconds=${2:?--seconds needs a number}; shift ;;
        --rounds) rounds=${2:?--rounds needs a number}; shift ;;
        --bin-dir) bin_dir=${2:?--bin-dir needs a folder}; shift ;;
        -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
        *) echo "error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$osj" ] || { echo "error: --osjitter must name an osjitter binary (got '$osj')" >&2; exit 2; }
jc="$bin_dir/jitter-collect"
[ -x "$jc" ] || { echo "error: $jc is missing (cargo build --release -p jitter-collect)" >&2; exit 2; }
for v in "$cpu" "$seconds" "$rounds"; do
    case "$v" in ''|*[!0-9]*) echo "error: --cpu, --seconds and --rounds take whole numbers" >&2; exit 2 ;; esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=$((seconds + 60))

# One line "detours_per_s noise_ratio loop_ns" from a table with osjitter's first ten columns.
row() { awk -v s="$seconds" '$1 ~ /^[0-9]+$/ && NF >= 10 { printf "%.1f %.6f %s\n", $3 / s, $8, $10; exit }'; }

run_jc() {
    timeout -k 5 "$limit" "$jc" --cpus "$cpu" --duration "${seconds}s" -q -o "$tmp/jc.jtr" >"$tmp/jc.txt" \
        || { echo "error: jitter-collect failed or ran over ${limit} s" >&2; cat "$tmp/jc.txt" >&2; exit 1; }
    head -1 "$tmp/jc.txt" >"$tmp/jc.head"
    row <"$tmp/jc.txt"
}
run_osj() {
    timeout -k 5 "$limit" "$osj" -t "$seconds" --cpu "$cpu" >"$tmp/osj.txt" 2>&1 \
        || { echo "error: osjitter failed or ran over ${limit} s" >&2; cat "$tmp/osj.txt" >&2; exit 1; }
    row <"$tmp/osj.txt"
}

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r), $(date -u +%Y-%m-%d)"
echo "# CPU $cpu, $rounds rounds of $seconds s per tool, interleaved, order alternating"
printf '%-6s %-14s %14s %12s %9s\n' round tool detours/s noise_ratio loop_ns
: >"$tmp/pairs"
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then a=$(run_jc); b=$(run_osj); else b=$(run_osj); a=$(run_jc); fi
    printf '%-6s %-14s %14s %12s %9s\n' "$r" jitter-collect $a
    printf '%-6s %-14s %14s %12s %9s\n' "$r" osjitter $b
    echo "$a $b" >>"$tmp/pairs"
done
echo "# jitter-collect: $(sed 's/^# [^:]*: //' "$tmp/jc.head")"
python3 - "$tmp/pairs" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
rate = [r[0] / r[3] for r in rows if r[3] > 0]
noise = [r[1] / r[4] for r in rows if r[4] > 0]
if not rate or not noise:
    sys.exit("error: osjitter saw no detours; nothing to compare")
med = statistics.median
print(f"median detours/s: jitter-collect {med(r[0] for r in rows):.0f}, osjitter {med(r[3] for r in rows):.0f}; "
      f"ratio per round {min(rate):.2f}..{max(rate):.2f}, median {med(rate):.2f}")
print(f"median noise ratio: jitter-collect {med(r[1] for r in rows):.4f}, osjitter {med(r[4] for r in rows):.4f}; "
      f"ratio per round {min(noise):.2f}..{max(noise):.2f}, median {med(noise):.2f}")
ok_rate = 0.5 <= med(rate) <= 2.0
ok_noise = 1 / 1.6 <= med(noise) <= 1.6
print(f"agreement: detours/s within x2: {'yes' if ok_rate else 'NO'}; noise ratio within x1.6: {'yes' if ok_noise else 'NO'}")
sys.exit(0 if ok_rate and ok_noise else 1)
PY
