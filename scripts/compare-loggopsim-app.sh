#!/usr/bin/env bash
# The held-out halo solver's skeleton at scale: LogGOPSim (SPCL) on the GOAL export of its
# profile (`replay-bench profile goal`) with a trace's noise, beside `replay-bench predict --app`
# of the same profile (where this replay-bench has it), at the same rank counts.
#
# The noise reaches LogGOPSim as scripts/compare-loggopsim.sh feeds it: `jitter-trace convert
# --to lgs`, every host from its own offset (LogGOPSim draws them from time(0): one draw per
# second), several draws. Slowdown on both sides: time with noise / time without - 1
# (LogGOPSim's maximum finishing time; predict's mean iteration period over its noise-free one,
# the report's `period_ns`, else its `sd_qtbt_pct`). predict runs sync none (independent
# offsets, as LogGOPSim), platform ideal (each detour as recorded), LogGOPSim's o and L, seeds
# 1..draws. "agree": predict's mean lies within LogGOPSim's range over its offset draws.
#
# LogGOPSim is built OUTSIDE this tree (github.com/spcl/LogGOPSim, `make` in src/LogGOPSim with
# Debian's gengetopt re2c libgraphviz-dev); JB_LOGGOPSIM names that built src/LogGOPSim folder.
#
# Usage: JB_LOGGOPSIM=DIR scripts/compare-loggopsim-app.sh [options]
#   --bin-dir DIR     replay-bench, jitter-trace, libjitter_preload.so [target/release]
#   --profile FILE    the halo profile [recorded here: tests/heldout/halo.c at np 2 under
#                     JITTER_PROFILE, 200 iterations of work 400000]
#   --trace FILE      noise trace [synthesized: periodic:period=4ms,dur=200us, 60 s]
#   --ranks "64 256"  rank counts [64 256 1024 4096]
#   --iterations N    iterations of the exported loop [20]
#   --draws N         LogGOPSim offset draws and predict seeds per rank count [10]
#   --o NS --l NS     LogP o and L [1 1]; LogGOPSim gets g = 1, G = 0
#   --predict-args "…" more flags for predict --app
#   --out DIR         results and scratch [compare-loggopsim-app-YYYYmmdd-HHMMSS]
#   --step-limit S    time limit of each step, s [1800]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "compare-loggopsim-app: error: $*" >&2; exit 1; }
bin_dir="$root/target/release" profile="" trace="" ranks="64 256 1024 4096" iterations=20
draws=10 o=1 l=1 predict_args="" out="" limit=1800
need() { [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin-dir) need "$@"; bin_dir="$2"; shift 2 ;;
    --profile) need "$@"; profile="$2"; shift 2 ;;
    --trace) need "$@"; trace="$2"; shift 2 ;;
    --ranks) need "$@"; ranks="${2//,/ }"; shift 2 ;;
    --iterations) need "$@"; iterations="$2"; shift 2 ;;
    --draws) need "$@"; draws="$2"; shift 2 ;;
    --o) need "$@"; o="$2"; shift 2 ;;
    --l) need "$@"; l="$2"; shift 2 ;;
    --predict-args) need "$@"; predict_args="$2"; shift 2 ;;
    --out) need "$@"; out="$2"; shift 2 ;;
    --step-limit) need "$@"; limit="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
whole() { [[ "$2" =~ ^[0-9]+$ && "$2" -ge "$3" ]] || die "$1 must be a whole number ≥ $3 (got '$2')"; }
whole --iterations "$iterations" 1; whole --draws "$draws" 1; whole --o "$o" 0; whole --l "$l" 0
whole --step-limit "$limit" 1
for n in $ranks; do whole --ranks "$n" 2; done

lgs="${JB_LOGGOPSIM:-}"
[[ -n $lgs ]] || die "set JB_LOGGOPSIM to a built LogGOPSim src/LogGOPSim folder (see --help)"
[[ -x $lgs/LogGOPSim && -x $lgs/txt2bin ]] || die "JB_LOGGOPSIM=$lgs has no built LogGOPSim and txt2bin"
[[ -d $bin_dir ]] || die "--bin-dir: $bin_dir is not a folder"
bin_dir="$(cd "$bin_dir" && pwd)"
rb="$bin_dir/replay-bench" jt="$bin_dir/jitter-trace" lib="$bin_dir/libjitter_preload.so"
for f in "$rb" "$jt"; do [[ -x $f ]] || die "$f is missing (cargo build --release, or give --bin-dir)"; done
"$rb" profile --help >/dev/null 2>&1 || die "$rb has no 'profile' command (too old: rebuild it)"
command -v python3 >/dev/null || die "python3 is not installed"
out="${out:-compare-loggopsim-app-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out" || die "cannot create $out"
out="$(cd "$out" && pwd)"
step() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# 1. The profile: the halo program at np 2, unless given.
if [[ -z $profile ]]; then
  [[ -f $lib ]] || die "$lib is missing (cargo build --release -p jitter-preload)"
  for t in mpicc mpirun; do command -v "$t" >/dev/null || die "$t is not installed (or give --profile)"; done
  [[ $EUID == 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  step "recording the halo program's profile at np 2"
  timeout 120 mpicc -O2 -o "$out/halo" "$root/tests/heldout/halo.c" 2>"$out/mpicc.log" \
    || die "mpicc failed on tests/heldout/halo.c (see $out/mpicc.log)"
  profile="$out/halo-np2.json"
  rm -rf "$profile" "$profile.ranks"
  env -u JITTER_TRACE LD_PRELOAD="$lib" JITTER_PROFILE="$profile" timeout -k 5 "$limit" \
    mpirun -np 2 --bind-to none "$out/halo" 200 400000 >"$out/profile.log" 2>&1 \
    || die "the profile run failed (see $out/profile.log)"
fi
[[ -e $profile ]] || die "--profile: $profile does not exist"
timeout "$limit" "$rb" profile show "$profile" >"$out/profile.txt" 2>&1 \
  || die "replay-bench profile show $profile failed (see $out/profile.txt)"

# 2. The trace and its LogGOPSim export (one stream: every host replays it from its own offset).
if [[ -z $trace ]]; then
  trace="$out/periodic.jtr"
  step "synthesizing $trace"
  timeout "$limit" "$jt" synth "periodic:period=4ms,dur=200us" --streams 1 --duration 60s \
    --seed 1 -o "$trace" >/dev/null 2>&1 || die "jitter-trace synth failed"
fi
[[ -f $trace ]] || die "--trace: $trace is not a file"
noise="$out/noise.lgs"
timeout "$limit" "$jt" convert "$trace" --to lgs -o "$noise" >/dev/null 2>&1 \
  || timeout "$limit" "$jt" convert "$trace" --to lgs -o "$out/noise.cpu{cpu}.lgs" >/dev/null 2>&1 \
  || die "jitter-trace convert $trace --to lgs failed"
[[ -f $noise ]] || noise="$(ls "$out"/noise.cpu*.lgs | head -1)"

has_predict_app=0
"$rb" predict --help 2>/dev/null | grep -q -- --app && has_predict_app=1

loggopsim_time() { # bin noise|"" → max finishing time, ns
  local args=(-f "$1" -L "$l" -o "$o" -g 1 -G 0 -b)
  [[ -n $2 ]] && args+=(--noise-trace "$2")
  timeout "$limit" "$lgs/LogGOPSim" "${args[@]}" \
    | sed -n 's/^Maximum finishing time at host [0-9]*: \([0-9]*\).*/\1/p'
}

rows="$out/rows.tsv"
: >"$rows"
for n in $ranks; do
  step "$n ranks: GOAL export and txt2bin"
  timeout "$limit" "$rb" profile goal "$profile" --ranks "$n" --iterations "$iterations" \
    -o "$out/s$n.goal" >"$out/goal-$n.log" 2>&1 || die "profile goal at $n ranks failed (see $out/goal-$n.log)"
  timeout "$limit" "$lgs/txt2bin" -i "$out/s$n.goal" -o "$out/s$n.bin" >"$out/txt2bin-$n.log" 2>&1 \
    || die "txt2bin at $n ranks failed (see $out/txt2bin-$n.log)"
  rm -f "$out/s$n.goal"
  clean="$(loggopsim_time "$out/s$n.bin" "")"
  [[ -n $clean ]] || die "LogGOPSim printed no finishing time at $n ranks without noise"
  for ((i = 1; i <= draws; i++)); do
    step "$n ranks: LogGOPSim draw $i/$draws"
    sleep 1 # its offsets come from time(0)
    t0=$(date +%s.%N)
    noisy="$(loggopsim_time "$out/s$n.bin" "$noise")"
    [[ -n $noisy ]] || die "LogGOPSim printed no finishing time at $n ranks with noise"
    printf '%s\tloggopsim\t%s\t%s\t%s\t%s\n' "$n" "$i" "$clean" "$noisy" \
      "$(python3 -c "print($(date +%s.%N) - $t0)")" >>"$rows"
  done
  rm -f "$out/s$n.bin"
  [[ $has_predict_app == 1 ]] || continue
  for ((i = 1; i <= draws; i++)); do
    step "$n ranks: replay-bench predict --app, seed $i/$draws"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout "$limit" "$rb" predict --app "$profile" --trace "$trace" --ranks "$n" --sync none \
      --seed "$i" --platform ideal --phases "$iterations" --logp-o-ns "$o" --logp-l-ns "$l" \
      $predict_args -o "$out/p$n-$i.json" >"$out/predict-$n-$i.log" 2>&1 \
      || die "predict --app at $n ranks failed (see $out/predict-$n-$i.log)"
    printf '%s\tpredict\t%s\t%s\t-\t%s\n' "$n" "$i" "p$n-$i.json" \
      "$(python3 -c "print($(date +%s.%N) - $t0)")" >>"$rows"
  done
done

python3 - "$out" "$rows" <<'EOF'
import json, os, sys
out, rows = sys.argv[1], sys.argv[2]
lgs, pred, secs = {}, {}, {}
def sd_of(report):
    row = report["results"][0]
    if row.get("period_ns"):
        mean, base = row["period_ns"]
        return 100 * (mean / base - 1), "period_ns"
    return float(row["sd_qtbt_pct"]), "sd_qtbt_pct"
for line in open(rows):
    n, who, i, a, b, s = line.rstrip("\n").split("\t")
    n = int(n)
    secs.setdefault((n, who), []).append(float(s))
    if who == "loggopsim":
        lgs.setdefault(n, []).append(100 * (int(b) / int(a) - 1))
    else:
        pred.setdefault(n, []).append(sd_of(json.load(open(os.path.join(out, a))))[0])
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
def welch(a, b):
    """mean(a) - mean(b) with its 95 % Welch t half-width (None below two values each)."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
    if va + vb == 0:
        return ma - mb, 0.0
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    t = T975[min(max(int(df), 1), 30) - 1] if df < 30 else 1.96
    return ma - mb, t * (va + vb) ** 0.5
summary = []
print(f"{'ranks':>6}  {'LogGOPSim % mean (min-max)':>28}  {'predict --app % mean (min-max)':>32}  agree  {'diff pp ± h (95 %)':>19}  {'lgs s':>6} {'pred s':>6}")
for n in sorted(lgs):
    L, P = lgs[n], pred.get(n)
    row = {"ranks": n, "loggopsim_pct": L, "predict_pct": P}
    cell = lambda v: f"{sum(v) / len(v):.2f} ({min(v):.2f}-{max(v):.2f})"
    agree, diff = "-", "-"
    if P:
        m = sum(P) / len(P)
        row["agree"] = min(L) <= m <= max(L)
        agree = "yes" if row["agree"] else "NO"
        w = welch(P, L)
        if w is not None:
            row["difference_pp"], row["difference_ci95_pp"] = w
            diff = f"{w[0]:+.2f} ± {w[1]:.2f}"
    ls = secs[(n, "loggopsim")]
    ps = secs.get((n, "predict"), [])
    print(f"{n:>6}  {cell(L):>28}  {(cell(P) if P else 'not in this replay-bench'):>32}  {agree:>5}  {diff:>19}  "
          f"{sum(ls) / len(ls):6.1f} {(sum(ps) / len(ps) if ps else float('nan')):6.1f}")
    summary.append(row)
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print("SD = time with noise / without - 1 over the draws (LogGOPSim: max finishing time, offsets from"
      " its clock; predict --app: sync none, platform ideal, seeds 1..draws); agree = predict's mean"
      " within LogGOPSim's range over offsets (the min and max of few draws, not an interval: diff"
      " is predict's mean - LogGOPSim's with its 95 % Welch interval, for a second look)")
EOF
