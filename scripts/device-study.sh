#!/usr/bin/env bash
# Predictor vs real runs on one many-core machine: collects a trace there (or takes given ones),
# calibrates the emulator, and for each process count runs a no-jitter baseline, the trace under
# sync none, once and phase, and a second baseline (drift check), then predicts the same
# configurations with `replay-bench predict --model des` and prints one comparison table.
# docs/VALIDATION.md "Simulation vs real runs on a 16-core machine" was made with it.
#
# usage: scripts/device-study.sh [--bin-dir DIR] [--out DIR] [--procs "1 2 4 8 16"]
#            [--trace FILE]... [--collect SECONDS] [--calibration FILE] [--wall SECONDS]
#            [--reps N] [--deadline SECONDS] [--baseline file|measured] [--probe 0.5s]
#   --trace        replay this trace too (repeat for several)
#   --collect      collect a trace here on all CPUs for this long and replay it first
#                  (default 15 without --trace, else 0: none)
#   --calibration  an emulator calibration (default: `jitter-emulate calibrate --json` here)
#   --wall         scaled wall time of the measured phases of one run (default 6 s; the
#                  period is wall / S, S from `replay-bench choose-scale --share 0.77 --max 20`)
#   --reps         repetitions of the whole sweep (run-to-run spread; default 1)
#   --deadline     skip the runs that would start after this many seconds (default: none)
#   --baseline     file: a separate no-jitter run per process count before the replays (and
#                  one after, for drift), read with `--baseline FILE` (as scripts/demo.sh does);
#                  measured: each replay measures its own baseline first, in the same job with
#                  the same iteration count (`--baseline measured`; default: file)
#   --probe        platform-noise probe per run (default 0.5s); --quanta: only 1ms
# env: MPIRUN (default mpirun), MPIRUN_FLAGS (extra launcher flags, e.g. --mca btl self,vader);
#      the 16-core study used OpenMPI 4.1.4 unpacked from Debian packages (MPIRUN=its orterun,
#      OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1, OPAL_PREFIX set to the unpacked /usr)
# Output: DIR/machine.txt, DIR/calibration.{json,txt}, DIR/<label>/{trace.jtr,stats.txt,
# predict-here.json}, DIR/rep<R>/<label>/{baseline-np*,run-np*-*,after-np*}.json (+ .txt and a
# study report.md), DIR/table.txt.
set -euo pipefail

bin_dir="" out="" procs="1 2 4 8 16" traces=() collect="" calibration="" wall=6 reps=1
deadline=0 quanta=1ms probe=0.5s baseline=file
die() { echo "device-study: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --bin-dir) bin_dir="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --procs) procs="$2"; shift 2 ;;
        --trace) traces+=("$2"); shift 2 ;;
        --collect) collect="$2"; shift 2 ;;
        --calibration) calibration="$2"; shift 2 ;;
        --wall) wall="$2"; shift 2 ;;
        --reps) reps="$2"; shift 2 ;;
        --deadline) deadline="$2"; shift 2 ;;
        --quanta) quanta="$2"; shift 2 ;;
        --probe) probe="$2"; shift 2 ;;
        --baseline) baseline="$2"; shift 2 ;;
        -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "${bin_dir:-$root/target/release}" && pwd)"
for b in jitter-collect jitter-trace jitter-emulate replay-bench; do
    [[ -x "$bin/$b" ]] || die "$bin/$b is missing (cargo build --release first)"
done
for t in "${traces[@]}"; do [[ -r "$t" ]] || die "cannot read trace $t"; done
[[ "$baseline" == file || "$baseline" == measured ]] || die "--baseline is file or measured"
[[ "$quanta" == 1ms ]] || die "only --quanta 1ms is supported (the period is computed in ms of q)"
cores=$(nproc)
for np in $procs; do
    [[ "$np" -le "$cores" ]] || die "np $np is more than the $cores CPUs here (never oversubscribed)"
done
out="${out:-device-study-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
say() { echo "== [$(date +%H:%M:%S) +${SECONDS}s] $*" >&2; }

mpirun_cmd=("${MPIRUN:-mpirun}" --bind-to core)
[[ "$(id -u)" == 0 ]] && mpirun_cmd+=(--allow-run-as-root)
# shellcheck disable=SC2206
mpirun_cmd+=(${MPIRUN_FLAGS:-})

set +o pipefail # `head` may close the pipes below early
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "nproc: $cores"
    uname -a
    grep -E '^(PRETTY_NAME|VERSION)=' /etc/os-release || true
    ldd --version 2>&1 | head -1
    lscpu 2>/dev/null || grep -m1 'model name' /proc/cpuinfo
    "${mpirun_cmd[0]}" --version 2>&1 | head -1
} >"$out/machine.txt"
set -o pipefail
say "machine: $(grep -m1 'Model name' "$out/machine.txt" || true), $cores CPUs"

[[ -n "$collect" ]] || collect=$(( ${#traces[@]} == 0 ? 15 : 0 ))
if [[ "$collect" != 0 ]]; then
    say "collecting a trace on all $cores CPUs for $collect s"
    "$bin/jitter-collect" --quiet --duration "${collect}s" --output "$out/device.jtr" \
        --label source=device-study >"$out/collect.txt" 2>&1
    traces=("$out/device.jtr" "${traces[@]}")
fi
if [[ -z "$calibration" ]]; then
    say "calibrating the emulator"
    "$bin/jitter-emulate" calibrate --json >"$out/calibration.json"
else
    cp "$calibration" "$out/calibration.json"
fi
# The report of this host's cached calibration (the one just measured, when it was measured here).
"$bin/jitter-emulate" calibrate >"$out/calibration.txt" 2>&1 || true

labels=() scales=() periods=()
for t in "${traces[@]}"; do
    label=$(basename "$t" .jtr)
    mkdir -p "$out/$label"
    [[ "$t" -ef "$out/$label/trace.jtr" ]] || cp "$t" "$out/$label/trace.jtr"
    "$bin/jitter-trace" stats "$out/$label/trace.jtr" >"$out/$label/stats.txt"
    s=$("$bin/replay-bench" choose-scale --trace "$t" --calibration "$out/calibration.json" \
        --share 0.77 --max 20 --allow-capped)
    # Period (unscaled) so that the measured phases take `wall` seconds of scaled time.
    p=$(awk -v w="$wall" -v s="$s" 'BEGIN { printf "%d", w * 1000 / s }')
    labels+=("$label") scales+=("$s") periods+=("$p")
    echo "$s" >"$out/$label/scale.txt"
    say "trace $label: S = $s, period ${p}ms (${wall} s scaled)"
done

late() { [[ "$deadline" -gt 0 && "$SECONDS" -ge "$deadline" ]]; }
run() { # run NP OUTPUT ARGS...  (a failed run is logged and skipped)
    local np="$1" o="$2"; shift 2
    if late; then echo "skipped (deadline): $o" >>"$out/skipped.txt"; return 0; fi
    "${mpirun_cmd[@]}" -np "$np" "$bin/replay-bench" run --quanta "$quanta" --noise-probe "$probe" \
        --seed 1 -o "$o.json" "$@" >"$o.txt" 2>&1 || echo "failed ($?): $o" >>"$out/failed.txt"
}
for rep in $(seq 1 "$reps"); do
    for np in $procs; do
        for i in "${!labels[@]}"; do
            label=${labels[$i]} s=${scales[$i]} p=${periods[$i]}
            d="$out/rep$rep/$label"
            mkdir -p "$d"
            common=(--period "${p}ms" --scale "$s")
            ref=(--design sequential --baseline measured)
            if [[ "$baseline" == file ]]; then
                say "rep $rep, np $np, $label: baseline"
                run "$np" "$d/baseline-np$np" "${common[@]}" --baseline quanta
                [[ -f "$d/baseline-np$np.json" ]] || continue
                ref=(--design sequential --baseline "$d/baseline-np$np.json")
            fi
            for sync in none once phase; do
                say "rep $rep, np $np, $label: sync $sync"
                run "$np" "$d/run-np$np-$sync" "${common[@]}" --trace "$out/$label/trace.jtr" \
                    --label trace --ranks-per-node 1 --sync "$sync" \
                    --calibration "$out/calibration.json" "${ref[@]}"
            done
            if [[ "$baseline" == file ]]; then
                say "rep $rep, np $np, $label: baseline again (drift)"
                run "$np" "$d/after-np$np" "${common[@]}" --baseline quanta
            fi
        done
    done
done

ranks=$(echo "$procs" | tr ' ' ',')
for i in "${!labels[@]}"; do
    label=${labels[$i]} s=${scales[$i]} p=${periods[$i]}
    say "predicting $label: ranks $ranks, S = $s, $p phases"
    "$bin/replay-bench" predict --trace "$out/$label/trace.jtr" --ranks "$ranks" \
        --sync none,once,phase --quanta "$quanta" --phases "$p" --model des --seed 1 \
        --platform "$out/calibration.json" --timer abstime --scale "$s" \
        -o "$out/$label/predict-here.json" >"$out/$label/predict-here.txt"
    for rep in $(seq 1 "$reps"); do
        d="$out/rep$rep/$label"
        cp "$out/$label/trace.jtr" "$out/$label/predict-here.json" "$out/calibration.json" "$d/"
        "$bin/replay-bench" study --dir "$d" --headline-ranks 16 >/dev/null 2>&1 || true
        rm -f "$d/trace.jtr"
    done
done

python3 - "$out" "${labels[@]}" >"$out/table.txt" <<'PY'
import glob, json, os, sys
out, labels = sys.argv[1], sys.argv[2:]
def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
print("SD in %; diff = measured eq.2 - predicted eq.2 in pp; noise = platform noise of the "
      "run's probe, max (mean) over ranks, %; drift = after/before baseline AvgMaxQTBT - 1, %")
for label in labels:
    pred = load(os.path.join(out, label, "predict-here.json"))
    p = {(r["ranks"], r["sync"]): r for r in (pred or {}).get("results", [])}
    print(f"\n{label}")
    print(f"{'rep':>3} {'np':>3} {'sync':>6} {'phases':>6} {'meas eq2':>9} {'meas eq3':>9} "
          f"{'pred eq2':>9} {'pred eq3':>9} {'diff':>7} {'noise max (mean)':>17} {'drift':>7}")
    for rd in sorted(glob.glob(os.path.join(out, "rep*", label))):
        rep = os.path.basename(os.path.dirname(rd))[3:]
        for path in sorted(glob.glob(os.path.join(rd, "run-np*-*.json")),
                           key=lambda x: (int(x.split("-np")[1].split("-")[0]), x)):
            rep_ = load(path)
            if not rep_:
                continue
            np_ = rep_["results"][0]["ranks"]
            before = load(os.path.join(rd, f"baseline-np{np_}.json"))
            after = load(os.path.join(rd, f"after-np{np_}.json"))
            drift = float("nan")
            if before and after:
                drift = (after["results"][0]["avg_max_qtbt_ns"]
                         / before["results"][0]["avg_max_qtbt_ns"] - 1) * 100
            noise = [c["platform_noise_ratio"] * 100 for c in rep_["calibration"]]
            for r in rep_["results"]:
                q = p.get((r["ranks"], r["sync"]))
                pe2 = q["sd_qtbt_pct"] if q else float("nan")
                pe3 = q["sd_qt_pct"] if q else float("nan")
                print(f"{rep:>3} {r['ranks']:>3} {r['sync']:>6} {r['phases']:>6} "
                      f"{r['sd_qtbt_pct']:>9.3f} {r['sd_qt_pct']:>9.3f} {pe2:>9.3f} {pe3:>9.3f} "
                      f"{r['sd_qtbt_pct'] - pe2:>+7.3f} "
                      f"{max(noise):>8.3f} ({sum(noise) / len(noise):.3f}) {drift:>+7.3f}")
PY
cat "$out/table.txt"
say "done: $out"
