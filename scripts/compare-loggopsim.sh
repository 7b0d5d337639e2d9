#!/usr/bin/env bash
# Side-by-side slowdown of `replay-bench predict` and LogGOPSim (SPCL) on one noise trace:
# the same loop (Algorithm 1: barrier; compute; barrier, dissemination barriers), the same
# LogP parameters, independent random trace offsets per rank, several LogGOPSim draws.
#
# LogGOPSim is built from its public source OUTSIDE this tree (it needs the Debian packages
# gengetopt re2c libgraphviz-dev). The schedule is a GOAL file this script writes (the messages
# of schedgen's dissemination pattern, chained phase after phase); the noise is exported with
# `jitter-trace convert --to lgs`.
#
# Slowdown on both sides is the run's time with noise over its time without noise, minus one:
# LogGOPSim's "Maximum finishing time" and the predictor's mean phase period (the report's
# `period_ns` entries), since LogGOPSim measures only a whole run.
#
# Usage: scripts/compare-loggopsim.sh [options]
#   --loggopsim DIR   LogGOPSim source: its src/LogGOPSim is built there [default: fetch into
#                     $WORK/loggopsim from $LOGGOPSIM_GIT, default github.com/spcl/LogGOPSim]
#   --trace FILE      noise trace (.jtr) [default: synthesize periodic:period=4ms,dur=120us, 60 s]
#   --ranks "16 64"   rank counts [default: 16 64 256 1024]
#   --phases N        phases [default: 500]
#   --draws N         LogGOPSim runs per rank count (its offsets come from the clock) [default: 5]
#   --o NS --l NS     LogP o and l [default: 1 1]; LogGOPSim gets g = 1, G = 0
#   --quanta NS       compute per phase [default: 1000000]
#   --work DIR        scratch [default: mktemp -d]
#   --step-limit S    time limit of each step, s [default: 1800]
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
lgs_src="" trace="" ranks="16 64 256 1024" phases=500 draws=5 o=1 l=1 q=1000000 work=""
limit=1800
while [[ $# -gt 0 ]]; do
  case "$1" in
    --loggopsim) lgs_src="$2"; shift 2 ;;
    --trace) trace="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --phases) phases="$2"; shift 2 ;;
    --draws) draws="$2"; shift 2 ;;
    --o) o="$2"; shift 2 ;;
    --l) l="$2"; shift 2 ;;
    --quanta) q="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --step-limit) limit="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "compare-loggopsim: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
work="${work:-$(mktemp -d)}"
mkdir -p "$work"
step() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# 1. LogGOPSim, built outside the tree.
if [[ -z "$lgs_src" ]]; then
  lgs_src="$work/loggopsim"
  if [[ ! -d "$lgs_src/src/LogGOPSim" ]]; then
    step "cloning LogGOPSim into $lgs_src"
    timeout "$limit" git clone -q "${LOGGOPSIM_GIT:-https://github.com/spcl/LogGOPSim}" "$lgs_src"
  fi
fi
lgs_dir="$lgs_src/src/LogGOPSim"
if [[ ! -x "$lgs_dir/LogGOPSim" || ! -x "$lgs_dir/txt2bin" ]]; then
  for tool in gengetopt re2c; do
    command -v "$tool" >/dev/null || { echo "compare-loggopsim: $tool missing (apt-get install -y gengetopt re2c libgraphviz-dev)" >&2; exit 1; }
  done
  step "building LogGOPSim in $lgs_dir"
  timeout "$limit" make -C "$lgs_dir" CXXFLAGS="-std=c++11 -O2 -Wno-deprecated -w" \
    LDFLAGS="-lcgraph" >"$work/loggopsim-build.log" 2>&1 \
    || { echo "compare-loggopsim: LogGOPSim build failed, see $work/loggopsim-build.log" >&2; exit 1; }
fi

# 2. Our tools.
step "building jitter-trace and replay-bench (release)"
(cd "$here" && timeout "$limit" cargo build -q --release -p jitter-trace-tool -p replay-bench)
bin="${CARGO_TARGET_DIR:-$here/target}/release"

# 3. The trace and its LogGOPSim export (one stream: every rank replays it from its own offset).
if [[ -z "$trace" ]]; then
  trace="$work/periodic.jtr"
  step "synthesizing $trace"
  timeout "$limit" "$bin/jitter-trace" synth "periodic:period=4ms,dur=120us" --streams 1 \
    --duration 60s --seed 1 -o "$trace" 2>/dev/null
fi
noise="$work/noise.lgs"
timeout "$limit" "$bin/jitter-trace" convert "$trace" --to lgs -o "$noise" 2>/dev/null \
  || timeout "$limit" "$bin/jitter-trace" convert "$trace" --to lgs -o "$work/noise.cpu{cpu}.lgs"
[[ -f "$noise" ]] || noise="$(ls "$work"/noise.cpu*.lgs | head -1)"

# 4. One GOAL schedule per rank count: per phase a dissemination barrier, compute q, another
# barrier; within a barrier, round k sends to rank + 2^k after the previous round's receive and
# receives from rank − 2^k (schedgen's dissemination pattern); phases chained by dependencies.
goal() {
  python3 - "$1" "$2" "$3" <<'EOF'
import sys
n, phases, q = map(int, sys.argv[1:])
out = sys.stdout
w = out.write
w(f"num_ranks {n}\n")
rounds = []
d = 1
while d < n:
    rounds.append(d)
    d <<= 1
for r in range(n):
    w(f"\nrank {r} {{\n")
    lab = 0
    last = None
    def op(text):
        global lab, last
        lab += 1
        w(f"l{lab}: {text}\n")
        if last is not None:
            w(f"l{lab} requires l{last}\n")
        last = lab
    for p in range(phases):
        for b in range(2):
            tag0 = (p * 2 + b) * 64
            for k, dist in enumerate(rounds):
                op(f"send 1b to {(r + dist) % n} tag {tag0 + k}")
                op(f"recv 1b from {(r - dist) % n} tag {tag0 + k}")
            if b == 0:
                op(f"calc {q}")
    w("}\n")
EOF
}

loggopsim_time() { # bin noise|"" → max finishing time, ns
  local args=(-f "$1" -L "$l" -o "$o" -g 1 -G 0 -b)
  [[ -n "$2" ]] && args+=(--noise-trace "$2")
  timeout "$limit" "$lgs_dir/LogGOPSim" "${args[@]}" | sed -n 's/^Maximum finishing time at host [0-9]*: \([0-9]*\).*/\1/p'
}

printf '%8s  %-24s  %-24s  %-24s  %6s  %6s\n' ranks "LogGOPSim" predict "predict offloaded" "lgs s" "pred s"
for n in $ranks; do
  step "$n ranks: GOAL schedule"
  timeout "$limit" bash -c "$(declare -f goal); goal $n $phases $q" >"$work/s$n.goal"
  timeout "$limit" "$lgs_dir/txt2bin" -i "$work/s$n.goal" -o "$work/s$n.bin" >/dev/null
  rm -f "$work/s$n.goal"
  clean="$(loggopsim_time "$work/s$n.bin" "")"
  sds=() lgs_s=0
  for ((i = 0; i < draws; i++)); do
    step "$n ranks: LogGOPSim draw $((i + 1))/$draws"
    # Its offsets are drawn from time(0): one draw per second at most.
    sleep 1
    t0=$(date +%s.%N)
    noisy="$(loggopsim_time "$work/s$n.bin" "$noise")"
    lgs_s=$(python3 -c "print($lgs_s + $(date +%s.%N) - $t0)")
    sds+=("$(python3 -c "print(100 * ($noisy / $clean - 1))")")
  done
  rm -f "$work/s$n.bin"
  pred() { # collective seed → SD by the period, %
    timeout "$limit" "$bin/replay-bench" predict --trace "$trace" --ranks "$n" --sync none \
      --phases "$phases" --quanta "${q}ns" --timer abstime --collective "$1" --seed "$2" \
      --logp-o-ns "$o" --logp-l-ns "$l" --barrier-stage-ns "$((2 * o + l))" \
      -o "$work/p$n-$1-$2.json" >/dev/null
    python3 - "$work/p$n-$1-$2.json" <<'EOF'
import json, sys
mean, base = json.load(open(sys.argv[1]))["results"][0]["period_ns"]
print(f"{100 * (mean / base - 1):.4f}")
EOF
  }
  pds=() pos=() pred_s=0
  for ((i = 1; i <= draws; i++)); do
    step "$n ranks: replay-bench predict, seed $i/$draws"
    t1=$(date +%s.%N)
    pds+=("$(pred dissemination "$i")")
    pred_s=$(python3 -c "print($pred_s + $(date +%s.%N) - $t1)")
    pos+=("$(pred offloaded "$i")")
  done
  summary() { python3 -c "
v = [$1]
print(f'{sum(v) / len(v):.2f} % ({min(v):.2f}-{max(v):.2f})')"; }
  printf '%8s  %-24s  %-24s  %-24s  %6.1f  %6.1f\n' "$n" \
    "$(summary "$(IFS=,; echo "${sds[*]}")")" "$(summary "$(IFS=,; echo "${pds[*]}")")" \
    "$(summary "$(IFS=,; echo "${pos[*]}")")" \
    "$(python3 -c "print($lgs_s / $draws)")" "$(python3 -c "print($pred_s / $draws)")"
done
echo "SD = time with noise / time without - 1, mean (min-max) over $draws draws (LogGOPSim: max"
echo "finishing time, offsets from its clock; predict: mean phase period, seeds 1..$draws);"
echo "predict = dissemination in virtual time, offloaded = --collective offloaded;"
echo "lgs s, pred s = mean time of one run (LogGOPSim without its schedule conversion)"
