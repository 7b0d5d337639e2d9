#!/usr/bin/env bash
# Scaling study of `replay-bench run` (paper 001, Figs. 5 and 6): for each process count, the
# trace under each sync mode, each run pairing its own baseline blocks (SD with a 95 % interval);
# one table (every SD with its interval, every row checked) and one SVG of slowdown vs processes.
#
# Inside a Slurm allocation (SLURM_JOB_ID set) it launches with srun and finds the MPI plugin
# itself (srun --mpi=list: pmix first, then pmi2, each tried with a 2-rank run; else mpirun in the
# allocation); outside, with mpirun. It says which launcher it used and whether ranks are bound.
# A process count that fails is a `failed` row and the study goes on; a row whose numbers fail a
# sanity check is `invalid` with the reason.
#
# usage: scripts/scaling-study.sh --trace FILE [--procs "1 2 4 8"] [--modes "none once phase"]
#            [--out DIR] [--period 10s] [--quanta 1ms] [--scale 1] [--ranks-per-node K]
#            [--metric qtbt|qt] [-- EXTRA replay-bench run ARGS]
#   --procs:          default: 1, 2, 4, ... up to the allocation's tasks (or CPUs), else "1 2"
#   --ranks-per-node: ranks replaying one node of the trace; default: the trace's streams
# env:   REPLAY_BENCH, JITTER_TRACE (binaries; default target/release/, built if missing),
#        MPI_PLUGIN (pmix, pmi2, ... or mpirun: skip the detection), SRUN_FLAGS, MPIRUN (default
#        mpirun), MPIRUN_FLAGS, STEP_LIMIT (seconds per run; default from period and scale).
# exit:  0 every row valid; 3 table written, some rows failed or invalid; 2 nothing could run.
set -uo pipefail

trace="" procs="" modes="none once phase" out="" period="10s" quanta="1ms" scale="1"
rpn="" metric="qtbt" extra=()
die() { echo "scaling-study: $*" >&2; exit 2; }
say() { echo "scaling-study: $*" >&2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --trace|--procs|--modes|--out|--period|--quanta|--scale|--ranks-per-node|--metric)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case "$1" in
        --trace) trace="$2" ;; --procs) procs="$2" ;; --modes) modes="$2" ;; --out) out="$2" ;;
        --period) period="$2" ;; --quanta) quanta="$2" ;; --scale) scale="$2" ;;
        --ranks-per-node) rpn="$2" ;; --metric) metric="$2" ;;
      esac
      shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ -n "$trace" ]] || die "--trace FILE is required"
[[ -r "$trace" ]] || die "cannot read trace $trace (from $PWD)"
command -v python3 >/dev/null || die "python3 is needed for the table"
trace="$(cd "$(dirname "$trace")" && pwd)/$(basename "$trace")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${REPLAY_BENCH:-$root/target/release/replay-bench}"
jt="${JITTER_TRACE:-$root/target/release/jitter-trace}"
if [[ ! -x "$bin" || ! -x "$jt" ]]; then
  say "building replay-bench and jitter-trace (release) in $root"
  (cd "$root" && timeout 1800 cargo build --release -q -p replay-bench -p jitter-trace-tool) ||
    die "cannot build replay-bench/jitter-trace (or set REPLAY_BENCH and JITTER_TRACE)"
fi
out="${out:-scaling-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out" || die "cannot create $out"
out="$(cd "$out" && pwd)"

# Node group size k: the ranks that replay one node of the trace = the trace's streams.
streams="$(timeout 300 "$jt" --json stats "$trace" |
  python3 -c 'import json,sys; print(len(json.load(sys.stdin)["stats"]["streams"]))')" ||
  die "cannot read the streams of $trace"
if [[ -z "$rpn" ]]; then
  rpn="$streams"
  say "node group: $rpn ranks per node (the trace's $streams streams; --ranks-per-node to change)"
else
  say "node group: $rpn ranks per node (given; the trace has $streams streams)"
fi

# Seconds of one run: paired design = period of jitter + as much baseline, times S, plus set-up.
limit="${STEP_LIMIT:-$(python3 - "$period" "$scale" <<'EOF'
import re, sys
m = re.fullmatch(r"([0-9.]+)\s*(ns|us|ms|s|min|m|h)?", sys.argv[1].strip())
unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, None: 1, "min": 60, "m": 60, "h": 3600}
secs = float(m.group(1)) * unit[m.group(2)] if m else 600
print(int(3 * 2 * secs * float(sys.argv[2]) + 300))
EOF
)}"

slots() { # tasks (or CPUs) of the allocation
  if [[ -n "${SLURM_NTASKS:-}" ]]; then echo "$SLURM_NTASKS"; return; fi
  local sum=0 part n r
  IFS=, read -ra part <<<"${SLURM_JOB_CPUS_PER_NODE:-}"
  for p in "${part[@]}"; do # "2(x4)" = 4 nodes of 2
    n="${p%%(*}" r=1
    [[ "$p" == *"(x"* ]] && r="${p##*(x}" && r="${r%)}"
    sum=$((sum + n * r))
  done
  echo "$sum"
}
if [[ -z "$procs" ]]; then
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    max="$(slots)" procs="" n=1
    while ((n <= max)); do procs+="$n "; n=$((n * 2)); done
    procs="${procs% }"
    say "process counts: $procs (up to the allocation's $max; --procs to change)"
  else
    procs="1 2"
  fi
fi

mpirun_flags=()
if "${MPIRUN:-mpirun}" --version 2>&1 | grep -q "Open MPI"; then
  [[ "$(id -u)" == 0 ]] && mpirun_flags+=(--allow-run-as-root)
  mpirun_flags+=(--bind-to core)
fi
launcher="" # srun:<plugin> or mpirun
cmd_for() { # NP: sets cmd to the launcher's command line for NP processes
  if [[ "$launcher" == srun:* ]]; then
    # shellcheck disable=SC2206
    cmd=(srun ${SRUN_FLAGS:-} --mpi="${launcher#srun:}" --ntasks="$1" --cpu-bind=cores)
  else
    # shellcheck disable=SC2206
    cmd=("${MPIRUN:-mpirun}" "${mpirun_flags[@]}" ${MPIRUN_FLAGS:-} -np "$1")
  fi
}
# One phase on two processes (one if only one fits): does this launcher start one MPI job of
# that size? (A launcher without PMI support starts independent singletons of one rank each.)
probe_np=1
if [[ -n "${SLURM_JOB_ID:-}" ]]; then
  (($(slots) >= 2)) && probe_np=2
elif (($(nproc) >= 2)); then
  probe_np=2
fi
probe_launcher() {
  launcher="$1"
  cmd_for "$probe_np"
  rm -f "$out/launcher-probe.json"
  timeout -k 10 120 "${cmd[@]}" "$bin" run --phases 1 --warmup 0 --quanta 1ms \
    -o "$out/launcher-probe.json" >"$out/launcher-probe.txt" 2>&1 || return 1
  local ranks
  ranks="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["ranks"])' \
    "$out/launcher-probe.json" 2>/dev/null)"
  if [[ "$ranks" != "$probe_np" ]]; then
    echo "started ${ranks:-no} rank(s) in one job, not $probe_np: no PMI between the processes" \
      >>"$out/launcher-probe.txt"
    return 1
  fi
}
if [[ -n "${SLURM_JOB_ID:-}" ]] && command -v srun >/dev/null; then
  plugins="$(srun --mpi=list 2>&1 | tr -s ' \t' '\n\n' | grep -E '^(pmix|pmi2|none|cray_shasta|pmix_v[0-9]+)$' | sort -u | paste -sd ' ')"
  say "srun --mpi=list: ${plugins:-nothing}"
  if [[ -n "${MPI_PLUGIN:-}" ]]; then
    tries=("$MPI_PLUGIN")
  else
    tries=()
    for p in pmix pmi2; do [[ " $plugins " == *" $p "* ]] && tries+=("$p"); done
    tries+=(mpirun)
  fi
  for p in "${tries[@]}"; do
    if [[ "$p" == mpirun ]]; then cand=mpirun; else cand="srun:$p"; fi
    if probe_launcher "$cand"; then break; fi
    why="$(grep -m1 -i -E 'pmi|mpi_init|not built|rank\(s\) in one job' "$out/launcher-probe.txt" ||
      grep -v '^\s*$' "$out/launcher-probe.txt" | tail -1)"
    say "launcher ${cand/:/ --mpi=} cannot start an MPI program: $why"
    launcher=""
  done
  [[ -n "$launcher" ]] || die "no launcher starts replay-bench here (tried ${tries[*]}; see $out/launcher-probe.txt)"
else
  probe_launcher mpirun || die "mpirun cannot start replay-bench: $(tail -1 "$out/launcher-probe.txt")"
fi
rm -f "$out/launcher-probe.json"
case "$launcher" in
  srun:*) say "launcher: srun --mpi=${launcher#srun:} --cpu-bind=cores" ;;
  *) say "launcher: ${MPIRUN:-mpirun} ${mpirun_flags[*]}" ;;
esac
echo "$launcher" >"$out/launcher.txt"
if [[ -n "${SLURM_JOB_ID:-}" ]] && command -v scontrol >/dev/null; then
  taskplugin="$(scontrol show config 2>/dev/null | sed -n 's/^TaskPlugin *= *//p')"
  say "Slurm TaskPlugin: ${taskplugin:-unknown}"
fi

# Binding: every task should see one core (its hyperthreads) only.
per_core="$(tr ',' '\n' </sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null |
  awk -F- '{n += (NF == 2 ? $2 - $1 + 1 : 1)} END {print n ? n : 1}')"
check_binding() { # NP
  local lines loose
  cmd_for "$1"
  # shellcheck disable=SC2016
  lines="$(timeout -k 10 120 "${cmd[@]}" bash -c \
    'echo "$(hostname -s) $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' 2>&1)"
  echo "$lines" >"$out/binding-np$1.txt"
  loose="$(awk -v k="$per_core" 'NF == 2 { n = 0; m = split($2, a, ",");
      for (i = 1; i <= m; i++) { if (split(a[i], b, "-") == 2) n += b[2] - b[1] + 1; else n++ }
      if (n > k) print $1 ":" $2 }' <<<"$lines" | sort -u | paste -sd ' ')"
  if [[ -n "$loose" ]]; then
    say "WARNING: np $1: ranks are not bound to a core (allowed CPUs $loose): the launcher" \
      "cannot bind here (Slurm TaskPlugin=${taskplugin:-?}); timings may include migrations"
    echo "$1 not bound: $loose" >>"$out/binding.txt"
  else
    say "binding: np $1: each rank bound to one core ($(awk '{print $2}' <<<"$lines" | sort -n | paste -sd ' '))"
    echo "$1 bound" >>"$out/binding.txt"
  fi
}

: >"$out/failed.tsv"
: >"$out/binding.txt"
common=(--quanta "$quanta" --period "$period" --scale "$scale" --ranks-per-node "$rpn")
n_modes=$(wc -w <<<"$modes") n_procs=$(wc -w <<<"$procs") step=0
for np in $procs; do
  check_binding "$np"
  for mode in $modes; do
    step=$((step + 1))
    name="${mode//:/_}-np$np"
    say "[$step/$((n_modes * n_procs))] $np processes, sync $mode (limit ${limit}s)"
    rm -f "$out/$name.json"
    cmd_for "$np"
    timeout -k 30 "$limit" "${cmd[@]}" "$bin" run "${common[@]}" --trace "$trace" --sync "$mode" \
      -o "$out/$name.json" "${extra[@]}" >"$out/$name.txt" 2>"$out/$name.err"
    rc=$?
    if [[ $rc -ne 0 || ! -s "$out/$name.json" ]]; then
      why="$(grep -E 'error|Error|ERROR' "$out/$name.err" | head -1)"
      [[ -n "$why" ]] || why="$(grep -v '^\s*$' "$out/$name.err" | tail -1)"
      [[ $rc -eq 124 ]] && why="ran past ${limit}s"
      printf '%s\t%s\texit %s: %s (%s)\n' "$np" "$mode" "$rc" "${why:-no message}" "$name.err" \
        | tr -s '\r' ' ' >>"$out/failed.tsv"
      say "   failed (exit $rc): ${why:-see $out/$name.err}"
      rm -f "$out/$name.json"
    fi
  done
done

python3 "$root/scripts/slurm/study-table.py" "$out" | tee "$out/study.txt"
status=${PIPESTATUS[0]}
shopt -s nullglob
reports=("$out"/*-np*.json)
if [[ ${#reports[@]} -gt 0 ]]; then
  "$bin" plot-study "${reports[@]}" --metric "$metric" --svg "$out/study.svg" \
    --title "Slowdown vs processes ($(basename "$trace"), q = $quanta, S = $scale)" \
    >"$out/plot-study.txt" || say "plot-study failed (see $out/plot-study.txt)"
fi
say "reports, table (study.txt) and plot (study.svg) in $out"
exit "$status"
