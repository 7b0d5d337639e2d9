#!/usr/bin/env bash
# The main job: collect a jitter trace on this machine, replay it under mpirun at np = 1 … 2,
# predict the slowdown for 16 … 65536 ranks, and write out/<timestamp>/report.md with plots and
# JSON. README command 1. Run `scripts/demo.sh --help` for the options.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() {
    cat <<'USAGE'
usage: scripts/demo.sh [--quick] [--trace FILE] [--duration SECONDS] [--out DIR]
                       [--np-max N] [--bin-dir DIR] [--inject auto|signal|boundary]

  --quick          a version that finishes in about a minute (5 s collection, short replays,
                   predictions up to 4096 ranks)
  --trace FILE     replay and predict an existing .jtr trace instead of collecting one
  --duration S     collection length in seconds (default 20; --quick 5)
  --out DIR        output folder (default out/<timestamp>)
  --np-max N       largest process count of the real replays (default min(nproc, 2))
  --bin-dir DIR    use binaries already built there (e.g. target/debug) instead of building
  --inject MODE    how the replays inject: `signal` (the timer signal, at the scale factor
                   choose-scale finds), `boundary` (paid at MPI calls, S = 1), or `auto`
                   (default: what `replay-bench choose-inject` finds for this machine and trace)

Every step has a time limit (build 30 min, collection its duration + 60 s, calibration 3 min,
each replay 60 s + 3 × its scaled time budget, each prediction 10 min); JB_STEP_TIMEOUT_SCALE=2
doubles them all. A step over its limit stops the demo with an error naming it.
USAGE
}

quick=0 trace="" duration="" out="" np_max="" bin_dir="" inject_mode=auto
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --trace) trace=${2:?--trace needs a file}; shift ;;
        --duration) duration=${2:?--duration needs seconds}; shift ;;
        --out) out=${2:?--out needs a folder}; shift ;;
        --np-max) np_max=${2:?--np-max needs a number}; shift ;;
        --bin-dir) bin_dir=${2:?--bin-dir needs a folder}; shift ;;
        --inject) inject_mode=${2:?--inject needs auto, signal or boundary}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=scripts/setup.sh
source scripts/setup.sh
steps=6
step=0
next() { step=$((step + 1)); jb_say "[$step/$steps] $*"; }

if [ "$quick" = 1 ]; then
    : "${duration:=5}"
    period=0.2s; budget=1s; block=10; phases=300; ranks=16..4096; probe=0.3s; max_scale=10
    predict_time=15s
else
    : "${duration:=20}"
    period=0.5s; budget=2s; block=25; phases=500; ranks=16..65536; probe=1s; max_scale=20
    predict_time=45s
fi
case "$duration" in ''|*[!0-9]*|0) echo "error: --duration must be a whole number of seconds > 0" >&2; exit 2 ;; esac
case "$inject_mode" in auto|signal|boundary) ;; *) echo "error: --inject must be auto, signal or boundary, not '$inject_mode'" >&2; exit 2 ;; esac
if [ -n "$trace" ] && [ ! -r "$trace" ]; then
    echo "error: cannot read trace '$trace'" >&2; exit 2
fi
cores=$(nproc)
: "${np_max:=$(( cores < 2 ? cores : 2 ))}"
case "$np_max" in ''|*[!0-9]*|0) echo "error: --np-max must be a number > 0" >&2; exit 2 ;; esac
if [ "$np_max" -gt "$cores" ]; then
    echo "error: --np-max $np_max is more than the $cores CPUs here (replays never oversubscribe)" >&2
    exit 2
fi
: "${out:=out/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/demo.log"
: >"$log"

next "set-up and build"
jb_setup
if [ -z "$bin_dir" ]; then
    jb_say "building release binaries (cargo build --release; the first build takes a few minutes)"
    jb_step build 1800 cargo build --release --quiet -p jitter-trace-tool -p jitter-collect \
        -p jitter-emulator-cli -p replay-bench >>"$log" 2>&1 || jb_fail $? "build failed; see $log"
    bin_dir=target/release
fi
bin=$(cd "$bin_dir" && pwd)
for b in jitter-collect jitter-trace jitter-emulate replay-bench; do
    [ -x "$bin/$b" ] || { echo "error: $bin/$b is missing (build it first)" >&2; exit 1; }
done
mpirun_cmd=(mpirun --bind-to none)
[ "$(id -u)" -eq 0 ] && mpirun_cmd+=(--allow-run-as-root)

# The counter and the machine first: a collection or replay on a counter the probe cannot read
# right would be garbage (jitter-collect --check exits non-zero then, and so does the demo).
jb_say "checking this machine's counter, timers and signal cost (jitter-collect --check)"
jb_step "machine check" 60 "$bin/jitter-collect" --check | tee "$out/check.txt"

if [ -n "$trace" ]; then
    next "using the trace $trace"
    cp "$trace" "$out/trace.jtr"
else
    next "collecting a trace on all $cores CPUs for ${duration} s"
    jb_step collect $((duration + 60)) "$bin/jitter-collect" --duration "${duration}s" \
        --output "$out/trace.jtr" --label source=demo | tee "$out/collect.txt"
fi
jb_step "trace statistics" 120 "$bin/jitter-trace" stats "$out/trace.jtr" | tee "$out/stats.txt"
# A trace the predictor refuses (CPUs busy with other work: a prediction would be that work's
# slowdown) stops the demo here, before minutes of replays: the predictor's own check, on 16
# ranks for one phase.
rc=0
jb_step "trace check" 120 "$bin/replay-bench" predict --trace "$out/trace.jtr" --ranks 16 \
    --phases 1 --quanta 1ms >>"$log" 2>"$out/check-trace.err" || rc=$?
if [ "$rc" -ne 0 ]; then
    cat "$out/check-trace.err" >&2
    jb_fail "$rc" "the predictor refuses this trace (above); collect again on a quiet machine or give one with --trace (kept: $out/trace.jtr)"
fi
for kind in density timeseries cdf; do
    jb_step "trace plot ($kind)" 120 "$bin/jitter-trace" plot "$out/trace.jtr" --kind "$kind" \
        -o "$out/$kind.svg" >>"$log"
done

next "calibrating the emulator, choosing how to inject and the scale factor"
# Measured once per host and kernel (about 20 s), then read from the cache.
jb_step calibration 180 "$bin/jitter-emulate" calibrate --json >"$out/calibration.json"
jb_step "calibration (text)" 180 "$bin/jitter-emulate" calibrate | tee "$out/calibration.txt"
# The signal injector where a small S reproduces most of the noise time; payment at MPI calls
# (S = 1) where the signal's cost would force a large S (the rule: docs/METHOD.md).
inject=$(jb_step "choose how to inject" 120 "$bin/replay-bench" choose-inject \
    --trace "$out/trace.jtr" --calibration "$out/calibration.json" 2>>"$log")
jb_say "$(grep '^choose-inject:' "$log" | tail -1)"
if [ "$inject_mode" != auto ] && [ "$inject_mode" != "$inject" ]; then
    jb_say "--inject $inject_mode: replaying with $inject_mode instead, as asked"
    inject=$inject_mode
fi
if [ "$inject" = boundary ]; then
    scale=1 platform=ideal
else
    scale=$(jb_step "choose the scale factor" 120 "$bin/replay-bench" choose-scale \
        --trace "$out/trace.jtr" --calibration "$out/calibration.json" --share 0.77 --max "$max_scale" --allow-capped)
    platform="$out/calibration.json"
fi
# One replay: start-up, noise probe and the scaled time budget twice (the paired design
# interleaves as much baseline as jitter), three times over, plus a minute.
replay_limit=$(awk -v p="${budget%s}" -v s="$scale" -v n="${probe%s}" \
    'BEGIN { v = 60 + 3 * (2 * p * s + n); printf "%d\n", (v == int(v)) ? v : int(v) + 1 }')
if [ "$inject" = boundary ]; then
    jb_say "paying the detours at MPI calls (--inject boundary), S = 1"
else
    jb_say "signal injection, scale factor S = $scale (smallest S that makes 77 % of the detours injectable, at most 20)"
fi

next "replaying under mpirun: np = 1 … $np_max, sync none, once, phase ($inject, S = $scale)"
# Each replay runs block pairs until its intervals are narrow enough for a verdict (narrower
# than half the slowdown) or its budget of $budget of jitter (× S) runs out, then the predictor
# replays the very stretches of the trace that run replayed (its windows) on the run's own
# calibrated injector: the report compares like with like. Blocks of $block phases: the paired
# t-interval needs pairs (50-phase blocks left the quick demo two pairs, a t quantile of 12.7
# and no verdict in 10 of 12 rows).
for np in $(seq 1 "$np_max"); do
    # A no-jitter run per np for the report's platform table; the replays measure their own
    # baseline in blocks interleaved with the jitter (the paired design, with a 95 % interval).
    jb_say "np $np: baseline without jitter"
    jb_step "baseline run at np $np" "$replay_limit" \
        "${mpirun_cmd[@]}" -np "$np" "$bin/replay-bench" run --quanta 1ms --period "$period" \
        --scale "$scale" --baseline quanta --noise-probe "$probe" --seed 1 \
        -o "$out/baseline-np$np.json" >>"$log" 2>&1 \
        || jb_fail $? "baseline run at np $np failed; see $log"
    for sync in none once phase; do
        jb_say "np $np: sync $sync"
        jb_step "replay at np $np, sync $sync" "$replay_limit" \
            "${mpirun_cmd[@]}" -np "$np" "$bin/replay-bench" run --trace "$out/trace.jtr" --label trace \
            --ranks-per-node 1 --sync "$sync" --quanta 1ms --until-verdict --max-time "$budget" --block-phases "$block" \
            --inject "$inject" --scale "$scale" --calibration "$out/calibration.json" \
            --noise-probe "$probe" --seed 1 -o "$out/run-np$np-$sync.json" >>"$log" 2>&1 \
            || jb_fail $? "replay at np $np, sync $sync failed; see $log"
        jb_step "prediction of the windows of np $np, sync $sync" 600 "$bin/replay-bench" predict \
            --windows-of "$out/run-np$np-$sync.json" --trace "$out/trace.jtr" \
            -o "$out/window-run-np$np-$sync.json" >>"$log" 2>&1 \
            || jb_fail $? "prediction of the windows of np $np, sync $sync failed; see $log"
    done
done

next "predicting ranks $ranks for sync none, once, phase"
# The timer the replays use (abstime: no drift between injections), which the indexed predictor
# answers without walking detours; itimer's drawn drift needs the walk (about 15x slower here).
# The precision mode: offset draws are added to every point until both its slowdowns' 95 %
# intervals are within 2 % (or 0.1 pp) of it, within a time budget; each row says how far it
# got and why it stopped.
jb_step predict 600 "$bin/replay-bench" predict --trace "$out/trace.jtr" --ranks "$ranks" \
    --sync none,once,phase --quanta 1ms --precision 2%,0.1pp --max-time "$predict_time" \
    --model des --seed 1 --timer abstime -o "$out/predict.json" --plot "$out/sd-vs-ranks.svg" \
    | tee "$out/predict.txt"
# What drives the headline prediction (2048 ranks): its share from each size class of detours.
jb_step "what drives the prediction" 600 "$bin/replay-bench" predict --trace "$out/trace.jtr" \
    --ranks 2048 --sync none,once,phase --quanta 1ms --phases "$phases" --model des --seed 1 \
    --timer abstime --drivers -o "$out/drivers.json" >>"$log" 2>&1 \
    || jb_fail $? "the drivers of the prediction failed; see $log"
# The whole trace at the replayed np, over five offset draws, beside each run's own windows.
jb_step "predict at the replayed np" 600 "$bin/replay-bench" predict --trace "$out/trace.jtr" \
    --ranks "$(seq -s, 1 "$np_max")" --sync none,once,phase --quanta 1ms --whole-trace \
    --draws 5 --model des --seed 1 --platform "$platform" --timer abstime --scale "$scale" \
    -o "$out/predict-here.json" >>"$log" 2>&1 || jb_fail $? "prediction at np 1 … $np_max failed; see $log"

next "writing $out/report.md"
jb_step report 120 "$bin/replay-bench" study --dir "$out" --report "$out/report.md"
