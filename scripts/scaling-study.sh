#!/usr/bin/env bash
# Scaling study of `replay-bench run` (paper 001, Figs. 5 and 6): for each process count, a
# no-jitter baseline and then the trace under each sync mode; all JSON reports are collected
# into one table and one SVG plot of slowdown vs processes.
#
# Runs under `srun` inside a Slurm allocation (SLURM_JOB_ID set), else under `mpirun`.
#
# usage: scripts/scaling-study.sh --trace FILE [--procs "1 2 4 8"] [--modes "none once phase"]
#            [--out DIR] [--period 10s] [--quanta 1ms] [--scale 1] [--ranks-per-node 1]
#            [--metric qtbt|qt] [-- EXTRA replay-bench run ARGS]
# env:   REPLAY_BENCH (binary; default target/release/replay-bench, built if missing),
#        MPIRUN (default mpirun), MPIRUN_FLAGS (extra launcher flags), SRUN_FLAGS.
set -euo pipefail

trace="" procs="1 2" modes="none once phase" out="" period="10s" quanta="1ms" scale="1"
rpn="1" metric="qtbt" extra=()
die() { echo "scaling-study: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --trace) trace="$2"; shift 2 ;;
    --procs) procs="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --period) period="$2"; shift 2 ;;
    --quanta) quanta="$2"; shift 2 ;;
    --scale) scale="$2"; shift 2 ;;
    --ranks-per-node) rpn="$2"; shift 2 ;;
    --metric) metric="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ -n "$trace" ]] || die "--trace FILE is required"
[[ -r "$trace" ]] || die "cannot read trace $trace"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${REPLAY_BENCH:-$root/target/release/replay-bench}"
if [[ ! -x "$bin" ]]; then
  (cd "$root" && cargo build --release -p replay-bench) || die "cannot build replay-bench"
fi
out="${out:-scaling-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"

launch() { # launch NP ARGS...
  local np="$1"; shift
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    # shellcheck disable=SC2086
    srun ${SRUN_FLAGS:-} --ntasks="$np" --cpu-bind=cores "$bin" "$@"
  else
    local flags=()
    if "${MPIRUN:-mpirun}" --version 2>&1 | grep -q "Open MPI"; then
      [[ "$(id -u)" == 0 ]] && flags+=(--allow-run-as-root)
      flags+=(--bind-to core)
    fi
    # shellcheck disable=SC2086
    "${MPIRUN:-mpirun}" "${flags[@]}" ${MPIRUN_FLAGS:-} -np "$np" "$bin" "$@"
  fi
}

common=(--quanta "$quanta" --period "$period" --scale "$scale" --ranks-per-node "$rpn")
for np in $procs; do
  base="$out/baseline-np$np.json"
  echo "== $np processes: baseline" >&2
  launch "$np" run "${common[@]}" --baseline quanta -o "$base" "${extra[@]}" >"$out/baseline-np$np.txt"
  for mode in $modes; do
    echo "== $np processes: sync $mode" >&2
    launch "$np" run "${common[@]}" --trace "$trace" --sync "$mode" --design sequential --baseline "$base" \
      -o "$out/${mode//:/_}-np$np.json" "${extra[@]}" >"$out/${mode//:/_}-np$np.txt"
  done
done

"$bin" plot-study "$out"/*.json --metric "$metric" --svg "$out/study.svg" \
  --title "Slowdown vs processes ($(basename "$trace"), q = $quanta, S = $scale)" |
  tee "$out/study.txt"
echo "reports, table and plot in $out" >&2
