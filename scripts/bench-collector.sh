#!/usr/bin/env bash
# Benchmarks of jitter-collect, side by side in one run on the same CPUs:
#  (a) probe loop period vs a minimal counter-read loop      (goal: within 10 %)
#  (b) detours/s, noise ratio and maximum vs oslat (rt-tests) (same story, differences explained)
#  (c) self-noise of the writer: drain every 100 / 50 ms vs only at the end (goal: <= 0.1 pp)
#  (d) RSS after 10 s and after 120 s                         (equal within the ring sizes)
# Usage: scripts/bench-collector.sh   (env: CPU=1 SECS=10 ROUNDS=3 RSS_SECS=120)
set -euo pipefail
cd "$(dirname "$0")/.."
CPU=${CPU:-1}
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-3}
RSS_SECS=${RSS_SECS:-120}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build -q --release -p jitter-collect --bin jitter-collect --example loop_period
cargo build -q --release -p jitter-trace-tool --bin jitter-trace
BIN=$TARGET/release/jitter-collect
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "## machine"
echo "date: $(date -u +%F), kernel $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"

echo
echo "## (a) loop period, CPU $CPU"
"$TARGET/release/examples/loop_period" "$CPU" 5

# Prints per CPU: detours/s, noise ratio, max ns, cpu, writer-active share, self-overlap share,
# writer CPU-time share.
row() {
  python3 -c '
import json,sys
s=json.load(open(sys.argv[1]))
n=len(s["rows"])
for r in s["rows"]:
    rt=r["rt_s"]*1e9
    print("%.1f %.5f %d %d %.6f %.6f %.6f" % (r["intr"]/r["rt_s"], r["iratio"], r["max_ns"],
          r["cpu"], s["self_ns"]/(rt*n), r["self_ns"]/rt, s["writer_cpu_ns"]/(rt*n)))
' "$1"
}

echo
echo "## (b) jitter-collect vs oslat on CPU $CPU, ${SECS} s each, alternating, both SCHED_FIFO 1"
echo "jitter-collect: --threshold-ns 1000; oslat: -f 1 -b 1024 (1 us buckets up to 1 ms)"
echo "tool            detours>1us/s  noise_ratio  max_us"
for r in $(seq "$ROUNDS"); do
  "$BIN" --cpus "$CPU" -d "${SECS}s" --threshold-ns 1000 --sched fifo --prio 1 -q --json \
    -o "$TMP/b.jtr" > "$TMP/b.json"
  row "$TMP/b.json" | awk '{printf "jitter-collect  %13.1f  %11.5f  %6.0f", $1, $2, $3/1000}'
  # The same trace seen through oslat's histogram: each detour floored to whole us, capped at 1023.
  "$TARGET/release/jitter-trace" convert "$TMP/b.jtr" -o "$TMP/b.csv" > /dev/null
  python3 - "$TMP/b.csv" "$TMP/b.json" <<'PY'
import csv,json,sys
runs=[int(x[2]) for x in list(csv.reader(open(sys.argv[1])))[1:]]
rt=json.load(open(sys.argv[2]))["rows"][0]["rt_s"]
print("   (oslat view: >=%.5f)" % (sum(min(r//1000,1023) for r in runs)*1e-6/rt))
PY
  oslat --cpu-list "$CPU" --duration "$SECS" -f 1 -b 1024 > "$TMP/oslat.txt" 2>&1
  python3 - "$TMP/oslat.txt" <<'PY'
import re,sys
t=open(sys.argv[1]).read(); secs=float(re.search(r"Duration:\s*([\d.]+)",t).group(1))
b={int(k):int(v) for k,v in re.findall(r"(\d+) \(us\):\s*(\d+)",t)}
mx=int(re.search(r"Maximum:\s*(\d+)",t).group(1))
over=sum(v for k,v in b.items() if k>=2)
# Bucket k holds loops of [k-1, k) us (the last one also the overflows): a lower bound of the
# noise is sum (k-1) x count.
low=sum((k-1)*v for k,v in b.items() if k>=2)*1e-6
print("oslat           %13.1f  >=%9.5f  %6d" % (over/secs, low/secs, mx))
PY
done

echo
echo "## (c) writer self-noise, all CPUs (writer shares them), SCHED_OTHER, ${SECS} s per run"
echo "writer_cpu = writer thread CPU time / (rt x CPUs) (its direct cost); writer_active = writer"
echo "windows / (rt x CPUs) (wall time, includes preemption); self_overlap = detour time within"
echo "50 us of a writer window / rt (upper bound, includes coincident foreign detours)"
echo "drain      mean_noise_ratio  writer_cpu  writer_active  self_overlap"
for r in $(seq "$ROUNDS"); do
  for mode in 100 50 0; do
    if [ "$mode" = 0 ]; then extra=(--drain-ms 0 --ring 1048576); name="end-only"; else extra=(--drain-ms "$mode"); name="${mode}ms"; fi
    "$BIN" -d "${SECS}s" -q --json "${extra[@]}" -o "$TMP/c.jtr" > "$TMP/c.json"
    row "$TMP/c.json" | awk -v n="$name" '{s+=$2; o+=$6; a=$5; c=$7; k++} END {printf "%-9s  %16.5f  %10.6f  %13.5f  %12.5f\n", n, s/k, c, a, o/k}'
  done
done

echo
echo "## (d) RSS, all CPUs, default ring (65536 detours x 16 B per CPU)"
"$BIN" -d "$((RSS_SECS + 5))s" -q -o "$TMP/d.jtr" > /dev/null &
PID=$!
sleep 10; R10=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
sleep $((RSS_SECS - 10)); R120=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
wait $PID
echo "VmRSS after 10 s: ${R10} kB, after ${RSS_SECS} s: ${R120} kB, difference $((R120 - R10)) kB"
echo "trace size: $(stat -c %s "$TMP/d.jtr") bytes"

echo
echo "## (e) detour mode vs FTQ mode (quantum 2^18 cycles) on CPU $CPU, ${SECS} s each, alternating,"
echo "probes at SCHED_FIFO 1, with a synthetic daemon (SCHED_FIFO 50, every 10 ms, spins 300 us)"
echo "mode      detours/s  noise_ratio  median_ns  <1us   daemon-like/s  daemon_median_ns  ftq_count_p1/p50/max"
for r in $(seq "$ROUNDS"); do
  for mode in detours ftq; do
    "$TARGET/release/jitter-collect" daemon --cpu "$CPU" --period 10ms --busy 300us -d $((SECS + 2))s --rt 50 &
    DPID=$!
    sleep 0.5
    "$BIN" --mode "$mode" --cpus "$CPU" -d "${SECS}s" --sched fifo --prio 1 -q --json \
      -o "$TMP/e.jtr" --ftq-csv "$TMP/e.csv" > "$TMP/e.json"
    wait $DPID
    "$TARGET/release/jitter-trace" convert "$TMP/e.jtr" -o "$TMP/e-records.csv" > /dev/null
    python3 - "$mode" "$TMP" <<'PY'
import csv,json,sys,os
mode,tmp=sys.argv[1],sys.argv[2]
r=json.load(open(tmp+"/e.json"))["rows"][0]
runs=[int(x[2]) for x in list(csv.reader(open(tmp+"/e-records.csv")))[1:]]
hits=sorted(x for x in runs if 270000<=x<=400000)
hidden=sum(x for x in runs if x>1000000)/1e9
ftq="-"
if mode=="ftq":
    c=sorted(int(x[3]) for x in list(csv.reader(open(tmp+"/e.csv")))[1:])
    ftq="%d/%d/%d"%(c[len(c)//100],c[len(c)//2],c[-1])
print("%-8s  %9.0f  %11.5f  %9d  %5.3f  %13.1f  %16d  %s"%(mode,r["intr"]/r["rt_s"],r["iratio"],
      r["median_ns"],r["under_1us"],len(hits)/(r["rt_s"]-hidden),hits[len(hits)//2] if hits else 0,ftq))
PY
  done
done
