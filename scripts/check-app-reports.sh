#!/usr/bin/env bash
# Records `replay-bench predict --app` JSON reports of two builds and compares them byte for
# byte (the `created_unix_s` line left out): the check that a change to `predict/app` (cost
# work) changes no prediction.
#
#   scripts/check-app-reports.sh REF_BIN NEW_BIN [OUT_DIR]
#
# REF_BIN is e.g. main's release replay-bench (its reports are recorded once into
# OUT_DIR/ref and reused while the file is there); NEW_BIN the build under test. Cases (11):
# the held-out halo and bulk profiles (np 1 and 2) of an application study on its periodic and
# collected traces, sync none and phase, 64 / 1000 / 4099 ranks, --draws 3, one thread; one case
# walks the cursors (--timer itimer: timer errors) and one predicts measured runs (--runs-of).
# DATA (required: the study lives outside the repository) holds profiles/, traces/ and app/ of
# that study.
# Runs' messages go to OUT_DIR/log. Exits non-zero if any report differs or any run fails.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 REF_BIN NEW_BIN [OUT_DIR]" >&2; exit 2; }
ref=$1 new=$2 out=${3:-/tmp/check-app-reports}
data=${DATA:?"DATA must name the folder holding profiles/, traces/ and app/ of the study"}
p=$data/profiles t=$data/traces
for f in "$ref" "$new" "$p/halo-np2.json" "$t/periodic.jtr"; do
    [ -e "$f" ] || { echo "error: $f not found" >&2; exit 2; }
done
mkdir -p "$out/ref" "$out/new"
common=(--phases 300 --threads 1)
d="--draws 3 --seed 1"
cases=(
    "halo2-per-none-64|--app $p/halo-np2.json --trace $t/periodic.jtr --ranks 64 --sync none $d"
    "halo2-per-phase-1000|--app $p/halo-np2.json --trace $t/periodic.jtr --ranks 1000 --sync phase $d"
    "halo2-col-none-4099|--app $p/halo-np2.json --trace $t/collected.jtr --ranks 4099 --sync none $d"
    "halo2-col-phase-64|--app $p/halo-np2.json --trace $t/collected.jtr --ranks 64 --sync phase $d"
    "halo1-col-none-1000|--app $p/halo-np1.json --trace $t/collected.jtr --ranks 1000 --sync none $d"
    "bulk2-per-none-4099|--app $p/bulk-np2.json --trace $t/periodic.jtr --ranks 4099 --sync none $d"
    "bulk2-col-phase-1000|--app $p/bulk-np2.json --trace $t/collected.jtr --ranks 1000 --sync phase $d"
    "bulk1-per-phase-64|--app $p/bulk-np1.json --trace $t/periodic.jtr --ranks 64 --sync phase $d"
    "bulk2-col-none-1000|--app $p/bulk-np2.json --trace $t/collected.jtr --ranks 1000 --sync none $d"
    "halo2-col-none-1000-itimer|--app $p/halo-np2.json --trace $t/collected.jtr --ranks 1000 --sync none --timer itimer $d"
    "halo2-runs-of|--app $p/halo-np2.json --trace $t/collected.jtr --ranks 2 --sync phase --runs-of $data/app/halo-np2-collected-phase.json --barriers-before 1"
)
fail=0
for c in "${cases[@]}"; do
    name=${c%%|*} args=${c#*|}
    # shellcheck disable=SC2086
    if [ ! -s "$out/ref/$name.json" ]; then
        timeout 600 "$ref" predict $args "${common[@]}" -o "$out/ref/$name.json" >/dev/null 2>>"$out/log"
    fi
    # shellcheck disable=SC2086
    if ! timeout 600 "$new" predict $args "${common[@]}" -o "$out/new/$name.json" >/dev/null 2>>"$out/log"; then
        echo "$name: the new build failed"; fail=1; continue
    fi
    if cmp -s <(grep -v '"created_unix_s"' "$out/ref/$name.json") \
        <(grep -v '"created_unix_s"' "$out/new/$name.json"); then
        echo "$name: identical"
    else
        echo "$name: DIFFERS"; fail=1
    fi
done
exit $fail
