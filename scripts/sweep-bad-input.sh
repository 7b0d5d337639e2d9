#!/usr/bin/env bash
# The bad-input sweep: every user-facing command given missing, empty, truncated,
# damaged and foreign files, a directory where a file belongs, out-of-range counts and durations,
# conflicting flags, lost detours, unwritable outputs, traces of 0 and 1 detours and mismatched
# reports. Each case states its outcome: a one-line `error: …` and the documented exit status
# (docs/RELIABILITY.md: jitter-trace 2, jitter-collect/-emulate/-inject and replay-bench 1, 2 for
# an argument the parser refuses), or a stated correct result. Every case runs under `timeout`
# in an empty folder; a refused case must leave that folder empty (nothing half-written).
#
# Prints one line per case group (`ok` or `MISHANDLED: why`) and the count; exits 1 when any
# group is mishandled, 2 when it cannot start. Usage:
#
#   scripts/sweep-bad-input.sh            # builds the debug binaries first (cargo, quiet)
#   JB_SWEEP_NO_BUILD=1 JB_BIN=target/release scripts/sweep-bad-input.sh
#   scripts/sweep-bad-input.sh -v         # also prints each sub-case and what it printed
#   JB_SWEEP_ONLY=predict scripts/sweep-bad-input.sh   # only the groups whose name matches
#
# Needs mpirun (OpenMPI) and mpicc for the `run` and preload groups (skipped, and counted as
# such, without them). Run as root on a VM, the `--sched`/SCHED_FIFO paths refuse only where
# documented. Takes about 1–2 minutes with debug binaries on a 2-vCPU machine.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
BIN=${JB_BIN:-$ROOT/target/debug}
[[ $BIN == /* ]] || BIN=$ROOT/$BIN
VERBOSE=0
[[ ${1:-} == -v ]] && VERBOSE=1
LIMIT=${JB_SWEEP_TIMEOUT:-30}

if [[ -z ${JB_SWEEP_NO_BUILD:-} ]]; then
    cargo build --quiet -p jitter-trace-tool -p jitter-collect -p jitter-emulator-cli -p jitter-preload \
        -p replay-bench --bins --lib || { echo "sweep: build failed" >&2; exit 2; }
fi
for b in jitter-trace jitter-collect jitter-emulate jitter-inject replay-bench libjitter_preload.so; do
    [[ -e $BIN/$b ]] || { echo "sweep: $BIN/$b is missing (build it, or set JB_BIN)" >&2; exit 2; }
done
JT=$BIN/jitter-trace JC=$BIN/jitter-collect JE=$BIN/jitter-emulate JI=$BIN/jitter-inject
RB=$BIN/replay-bench PRELOAD=$BIN/libjitter_preload.so

W=$(mktemp -d /tmp/jb-sweep.XXXXXX) || exit 2
trap '[[ -n ${JB_SWEEP_KEEP:-} ]] || rm -rf "$W"' EXIT
F=$W/fix    # fixtures, read-only for the cases
O=$W/out    # each case's working folder, emptied before it
mkdir -p "$F" "$O"
# A private cache: a corrupt calibration in one case must not touch the user's.
export XDG_CACHE_HOME=$W/cache
mkdir -p "$XDG_CACHE_HOME/jitterbench"
[[ -d $HOME/.cache/jitterbench ]] && cp "$HOME"/.cache/jitterbench/*.json "$XDG_CACHE_HOME/jitterbench/" 2>/dev/null
HAVE_MPI=1
command -v mpirun >/dev/null && command -v mpicc >/dev/null || HAVE_MPI=0
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 1)

# ---- the case machinery ----------------------------------------------------------------------
GROUPS_RUN=0 BAD=0 SKIPPED=0 GROUP="" WHY="" SKIP=""
declare -a BAD_LIST=()

finish_group() {
    [[ -z $GROUP ]] && return
    if [[ -n $SKIP ]]; then
        printf 'skipped     %-60s %s\n' "$GROUP" "$SKIP"
        SKIPPED=$((SKIPPED + 1))
    elif [[ -z $WHY ]]; then
        printf 'ok          %s\n' "$GROUP"
    else
        printf 'MISHANDLED  %s: %s\n' "$GROUP" "$WHY"
        BAD=$((BAD + 1))
        BAD_LIST+=("$GROUP")
    fi
    GROUP=""
}

# group NAME: starts a case group (one line of the result).
group() {
    finish_group
    GROUP=$1 WHY="" SKIP=""
    if [[ -n ${JB_SWEEP_ONLY:-} && $GROUP != *"$JB_SWEEP_ONLY"* ]]; then SKIP="(not selected)"; return; fi
    GROUPS_RUN=$((GROUPS_RUN + 1))
}

skip_group() { SKIP=$1; }

fail() { [[ -z $WHY ]] && WHY=$1; [[ $VERBOSE == 1 ]] && echo "      -> $1"; }

# expect RC REGEX [--stdout] [--mpi] [--leaves NAME]... [--same FILE]... [--limit S] -- CMD...
#   RC: the exit status wanted (0 for a stated correct result); REGEX: an extended regex the one
#   `error:` line (RC > 0) or standard output and error together (RC 0) must match.
#   --mpi: the command runs under mpirun (its own lines are allowed; mpirun's status is any
#   non-zero for RC > 0); --leaves: a file the case may (must) leave in its folder;
#   --same: a file that must be byte-for-byte the same after the case.
expect() {
    [[ -n $SKIP ]] && return
    local want=$1 re=$2 mpi=0 limit=$LIMIT
    shift 2
    local -a leaves=() same=()
    while [[ $1 != -- ]]; do
        case $1 in
            --mpi) mpi=1; shift ;;
            --leaves) leaves+=("$2"); shift 2 ;;
            --same) same+=("$2"); shift 2 ;;
            --limit) limit=$2; shift 2 ;;
            *) echo "sweep: bad option $1" >&2; exit 2 ;;
        esac
    done
    shift
    local -a sums=()
    local f
    for f in "${same[@]}"; do sums+=("$(cksum <"$f")"); done
    rm -rf "$O" && mkdir -p "$O"
    local t0=$SECONDS
    (cd "$O" && timeout -k 5 "$limit" "$@" >"$W/stdout" 2>"$W/stderr" </dev/null)
    local rc=$?
    local what="\`${*##*/}\`"
    what="\`$(printf '%s ' "$@" | sed "s#$BIN/##g; s#$W/##g; s#$ROOT/##g" | cut -c1-110)\`"
    if [[ $VERBOSE == 1 ]]; then
        echo "   [$rc, $((SECONDS - t0)) s] $what"
        sed 's/^/      | /' "$W/stderr" | tail -4
    fi
    if ((rc == 124 || rc == 137)); then fail "$what did not end within ${limit}s"; return; fi
    if ((rc == 101)) || grep -qE 'panicked|internal error|RUST_BACKTRACE' "$W/stderr" "$W/stdout"; then
        fail "$what panicked (rc $rc): $(grep -m1 -E 'panicked|internal error' "$W/stderr" "$W/stdout")"
        return
    fi
    local errs nerr
    errs=$(grep -E '(^|: )error: ' "$W/stderr")
    nerr=$(grep -cE '(^|: )error: ' "$W/stderr")
    if [[ $want == 0 ]]; then
        if ((rc != 0)); then fail "$what: exit $rc, wanted 0: $(tail -1 "$W/stderr")"; return; fi
        if ! grep -qE -- "$re" "$W/stdout" "$W/stderr"; then
            fail "$what: exit 0 but no /$re/ in its output: $(tail -1 "$W/stderr")"
            return
        fi
    else
        if ((rc == 0)); then fail "$what: exit 0, wanted $want (/$re/): $(tail -1 "$W/stdout")"; return; fi
        if ((mpi == 0)) && ! [[ $rc =~ ^($want)$ ]]; then fail "$what: exit $rc, wanted $want: $(tail -1 "$W/stderr")"; return; fi
        if ((nerr != 1)); then fail "$what: $nerr error lines, wanted 1: $(head -c 300 "$W/stderr" | tr '\n' '|')"; return; fi
        if ((mpi == 0)) && [[ $(tail -1 "$W/stderr") != error:* ]]; then
            fail "$what: the error is not one line (text after it): $(tail -2 "$W/stderr" | tr '\n' '|')"
            return
        fi
        if ! grep -qE -- "$re" <<<"$errs"; then fail "$what: error line does not match /$re/: $errs"; return; fi
    fi
    local left l ok
    left=$(cd "$O" && find . -mindepth 1 -maxdepth 3 ! -name . | sed 's#^\./##')
    for f in $left; do
        ok=0
        for l in "${leaves[@]}"; do [[ $f == "$l" || $f == "$l"/* ]] && ok=1; done
        ((ok)) || { fail "$what left $f behind"; return; }
    done
    local i=0
    for f in "${same[@]}"; do
        [[ $(cksum <"$f") == "${sums[$i]}" ]] || { fail "$what changed $f"; return; }
        i=$((i + 1))
    done
}

# ---- fixtures --------------------------------------------------------------------------------
say() { [[ $VERBOSE == 1 ]] && echo "sweep: $*"; true; }
mk() { timeout 60 "$@" >/dev/null 2>"$W/fixture.err" || { echo "sweep: fixture failed: $* ($(tail -1 "$W/fixture.err"))" >&2; exit 2; }; }
say "fixtures in $F"
mk "$JT" synth 'periodic:period=1ms,dur=20us' --duration 2s --streams 2 -o "$F/good.jtr"
mk "$JT" synth 'periodic:period=1ms,dur=30us' --duration 2s --streams 2 -o "$F/good2.jtr"
mk "$JT" synth 'periodic:period=10ms,dur=100us' --duration 20s --streams 1 -o "$F/long.jtr"
mk "$JT" synth 'poisson:rate=1000/s,dur=exp:2us' --duration 2s -o "$F/short.jtr"
mkdir -p "$F/other" && cp "$F/good2.jtr" "$F/other/good.jtr"   # another trace, same name
# a window of 0.8 ms between two detours: 2 streams, 0 detours; one of 1 ms: 1 detour
mk "$JT" slice "$F/good.jtr" --start 100us --end 900us -o "$F/zero.jtr"
mk "$JT" slice "$F/long.jtr" --start 5ms --end 15ms -o "$F/one.jtr"
printf 'cpu,start_ns,run_ns\n' >"$F/nostreams.csv"
mk "$JT" convert "$F/nostreams.csv" -o "$F/nostreams.jtr"
: >"$F/empty.jtr"
cp /bin/true "$F/elf.jtr"          # a foreign file under a trace's name
head -c 4096 /dev/urandom >"$F/noise.jtr"
SIZE=$(stat -c %s "$F/good.jtr")
head -c $((SIZE * 2 / 3)) "$F/good.jtr" >"$F/trunc.jtr"
cp "$F/good.jtr" "$F/damaged.jtr"
# flip one byte in the middle of the file (inside a chunk)
python3 - "$F/damaged.jtr" <<'EOF' || { echo "sweep: python3 is needed" >&2; exit 2; }
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0xFF; open(p, 'wb').write(b)
EOF
mkdir -p "$F/adir" "$F/adir.jtr" "$F/adir.csv" "$F/adir.json" "$F/adir.svg"
say "collecting a lossy trace (--ring 2 --drain-ms 0 -d 1s --force)"
timeout 60 "$JC" --cpus 0 --ring 2 --drain-ms 0 -d 1s --force -o "$F/lossy.jtr" >/dev/null 2>&1
[[ -s $F/lossy.jtr ]] || { echo "sweep: could not collect the lossy fixture" >&2; exit 2; }
mk "$RB" predict --trace "$F/good.jtr" --ranks 2,4 --sync none,phase --phases 50 -o "$F/p.json"
mk "$RB" predict --trace "$F/good.jtr" --ranks 2,4 --sync none,phase --phases 50 --quanta 2ms -o "$F/p-q2.json"
mk "$RB" predict --trace "$F/other/good.jtr" --ranks 2,4 --sync none,phase --phases 50 -o "$F/p-other.json"
mk "$RB" predict --trace "$F/good.jtr" --ranks 8 --sync once --phases 50 -o "$F/p-far.json"
echo '{"not": "a report"}' >"$F/notreport.json"
echo '{"format": "jitterbench-profile", "version": 1, "program": "x", "job": "j", "ranks": 2, "reported": [], "missing": [0, 1], "cartesian": null, "main_loop": null}' >"$F/loopless.json"
timeout 120 "$JE" calibrate --json >"$F/cal.json" 2>"$W/fixture.err" || { echo "sweep: calibration failed: $(tail -1 "$W/fixture.err")" >&2; exit 2; }
if ((HAVE_MPI)); then
    mk mpicc -O1 -o "$F/app" "$ROOT/emulator/preload/tests/app/compute_barrier.c"
fi
# The input classes of docs/RELIABILITY.md: an attributed trace, a trace under another format's name, a one-row CSV,
# a platform trace of other work, and two small file systems (a 1 MiB one, and a full one).
ATTR=1
timeout 60 "$JC" --attribute --cpus 0 -d 1s --force -o "$F/attr.jtr" >/dev/null 2>&1 || ATTR=0
cp "$F/good.jtr" "$F/jtr-named.csv"
mk "$JT" convert "$F/good.jtr" -o "$F/good.csv"
cp "$F/good.csv" "$F/csv-named.jtr"
printf 'cpu,start_ns,run_ns\n0,1000,20000\n' >"$F/one-row.csv"
mk "$JT" synth 'periodic:period=1ms,dur=990us' --duration 2s --streams 2 -o "$F/busy.jtr"
SMALL=0
mkdir -p "$W/tiny" "$W/full"
if mount -t tmpfs -o size=1m tmpfs "$W/tiny" 2>/dev/null; then
    if mount -t tmpfs -o size=64k tmpfs "$W/full" 2>/dev/null; then
        SMALL=1
        dd if=/dev/zero of="$W/full/fill" bs=4k 2>/dev/null
    else
        umount "$W/tiny"
    fi
fi
trap 'if ((SMALL)); then umount "$W/tiny" "$W/full"; fi; [[ -n ${JB_SWEEP_KEEP:-} ]] || rm -rf "$W"' EXIT

# ==== jitter-trace ============================================================================
group "jitter-trace stats: a missing file"
expect 2 'nope.jtr' -- "$JT" stats "$F/nope.jtr"
group "jitter-trace stats: an empty file"
expect 2 'empty' -- "$JT" stats "$F/empty.jtr"
group "jitter-trace stats: a directory given as a trace"
expect 2 'director' -- "$JT" stats "$F/adir.jtr"
group "jitter-trace stats/convert: foreign files (an ELF binary, random bytes)"
expect 2 'not a .jtr' -- "$JT" stats "$F/elf.jtr"
expect 2 'not a .jtr' -- "$JT" convert "$F/noise.jtr" -o x.csv
group "jitter-trace stats: a truncated trace (refused; --salvage prints the share kept)"
expect 2 '(truncated|ends inside).*salvage' -- "$JT" stats "$F/trunc.jtr"
expect 0 'kept' -- "$JT" stats --salvage "$F/trunc.jtr"
group "jitter-trace stats/slice/plot: one flipped byte in a chunk"
expect 2 'damaged' -- "$JT" stats "$F/damaged.jtr"
expect 2 'damaged' -- "$JT" slice "$F/damaged.jtr" --fraction 0:0.5 -o s.jtr
expect 2 'damaged' -- "$JT" plot "$F/damaged.jtr" -o p.svg
group "jitter-trace stats/convert: lost detours (ring overflow)"
expect 2 'dropped.*salvage' -- "$JT" stats "$F/lossy.jtr"
expect 2 'dropped' -- "$JT" convert "$F/lossy.jtr" -o l.csv
expect 0 'share kept' -- "$JT" stats --salvage "$F/lossy.jtr"
group "jitter-trace stats: a trace with 0 detours (a quiet trace: 0 detours, no NaN)"
expect 0 'detours +0( |$)' -- "$JT" stats "$F/zero.jtr"
grep -qiE '\bnan\b|\binf\b' "$W/stdout" && fail "stats of 0 detours prints NaN/inf: $(grep -iE 'nan|inf' "$W/stdout" | head -1)"
group "jitter-trace stats: a 1-detour trace (its one value, no NaN)"
expect 0 'detours +1( |$)' -- "$JT" stats "$F/one.jtr"
grep -qiE '\bnan\b|\binf\b' "$W/stdout" && fail "stats of 1 detour prints NaN/inf: $(grep -iE 'nan|inf' "$W/stdout" | head -1)"
group "jitter-trace stats: --scale/--share without --overhead; --scale 0/-1/nan, --share 2, --overhead -1us"
expect 2 'overhead' -- "$JT" stats "$F/good.jtr" --scale 0
expect 2 'overhead' -- "$JT" stats "$F/good.jtr" --share 0.5
expect 2 'scale' -- "$JT" stats "$F/good.jtr" --overhead 10us --scale 0
expect 2 'scale' -- "$JT" stats "$F/good.jtr" --overhead 10us --scale=-1
expect 2 'scale' -- "$JT" stats "$F/good.jtr" --overhead 10us --scale nan
expect 2 'share' -- "$JT" stats "$F/good.jtr" --overhead 10us --share 2
expect 2 'overhead|duration|-1us' -- "$JT" stats "$F/good.jtr" --overhead=-1us
group "jitter-trace convert: -o a directory, a missing folder, /dev/full"
expect 2 'director' -- "$JT" convert "$F/good.jtr" -o "$F/adir.csv"
expect 2 'does not exist' -- "$JT" convert "$F/good.jtr" -o no/such/x.csv
expect 2 'No space' -- "$JT" convert "$F/good.jtr" -o /dev/full --to csv
group "jitter-trace convert: an unwritable output (a folder no file can be created in: /proc)"
expect 2 'proc' -- "$JT" convert "$F/good.jtr" -o /proc/sweep-x.csv
group "jitter-trace convert: conflicting -o x.csv --to jtr; a name of another format"
expect 2 'CSV' -- "$JT" convert "$F/good.jtr" -o x.csv --to jtr
expect 2 '\.png' -- "$JT" plot "$F/good.jtr" -o p.png
group "jitter-trace convert: a CSV with bad rows (text, negative, missing column)"
printf 'cpu,start_ns,run_ns\n0,abc,5\n' >"$W/bad1.csv"
printf 'cpu,start_ns,run_ns\n0,100,-5\n' >"$W/bad2.csv"
printf 'cpu,start_ns,run_ns\n0,100\n' >"$W/bad3.csv"
expect 2 'bad1' -- "$JT" convert "$W/bad1.csv" -o x.jtr
expect 2 'bad2' -- "$JT" convert "$W/bad2.csv" -o x.jtr
expect 2 'bad3' -- "$JT" convert "$W/bad3.csv" -o x.jtr
group "jitter-trace convert: a sysjitter file of garbage; --from with a foreign file"
expect 2 'noise.jtr: this is binary data, not sysjitter' -- "$JT" convert "$F/noise.jtr" --from sysjitter -o x.jtr
expect 2 'elf.jtr: this is an ELF executable or library, not LogGOPSim' -- "$JT" convert "$F/elf.jtr" --from loggopsim -o x.jtr
group "jitter-trace slice: --cpus 0,0; a CPU the trace lacks; --start past the end"
expect 2 'twice' -- "$JT" slice "$F/good.jtr" --cpus 0,0 -o s.jtr
expect 2 'CPU 7|cpu 7' -- "$JT" slice "$F/good.jtr" --cpus 7 -o s.jtr
expect 2 'after the trace' -- "$JT" slice "$F/good.jtr" --start 5s -o s.jtr
group "jitter-trace slice: --end before --start, --fraction 0.5:0.2 / 0:2 / nan:1"
expect 2 'end|start' -- "$JT" slice "$F/good.jtr" --start 1s --end 500ms -o s.jtr
expect 2 'fraction|0.5:0.2' -- "$JT" slice "$F/good.jtr" --fraction 0.5:0.2 -o s.jtr
expect 2 'fraction|0:2' -- "$JT" slice "$F/good.jtr" --fraction 0:2 -o s.jtr
expect 2 'fraction|nan' -- "$JT" slice "$F/good.jtr" --fraction nan:1 -o s.jtr
group "jitter-trace scale: factor 0, -1, nan, inf, 1e-12 (merges detours)"
expect 2 'scale|factor' -- "$JT" scale "$F/good.jtr" 0 -o s.jtr
expect 2 'scale|factor' -- "$JT" scale "$F/good.jtr" -1 -o s.jtr
expect 2 'scale|factor' -- "$JT" scale "$F/good.jtr" nan -o s.jtr
expect 2 'scale|factor' -- "$JT" scale "$F/good.jtr" inf -o s.jtr
expect 2 'merge' -- "$JT" scale "$F/good.jtr" 1e-12 -o s.jtr
group "jitter-trace merge: --min-sleep -1us, nan, -1s"
expect 2 'min-sleep|duration' -- "$JT" merge "$F/good.jtr" --min-sleep=-1us -o m.jtr
expect 2 'min-sleep|duration' -- "$JT" merge "$F/good.jtr" --min-sleep nan -o m.jtr
expect 2 'min-sleep|duration' -- "$JT" merge "$F/good.jtr" --min-sleep=-1s -o m.jtr
group "jitter-trace merge: --min-sleep 2d (a stated result: every stream one detour)"
expect 0 'merged 3998' --leaves m.jtr -- "$JT" merge "$F/good.jtr" --min-sleep 2d -o m.jtr
group "jitter-trace synth: a spec of garbage, an unknown key, dur ≥ period"
expect 2 'spec|garbage|unknown' -- "$JT" synth 'garbage' --duration 1s -o s.jtr
expect 2 'bogus|unknown|key' -- "$JT" synth 'periodic:period=1ms,bogus=3' --duration 1s -o s.jtr
expect 2 'shorter than the period' -- "$JT" synth 'periodic:period=1ms,dur=2ms' --duration 1s -o s.jtr
group "jitter-trace synth: --duration 0, -1s, nan, 1e30s; --streams 0, 10^9"
expect 2 'duration' -- "$JT" synth 'periodic:period=1ms,dur=10us' --duration 0 -o s.jtr
expect 2 'duration|-1s' -- "$JT" synth 'periodic:period=1ms,dur=10us' --duration=-1s -o s.jtr
expect 2 'duration|nan' -- "$JT" synth 'periodic:period=1ms,dur=10us' --duration nan -o s.jtr
expect 2 'duration|limit|GiB|long' -- "$JT" synth 'periodic:period=1ms,dur=10us' --duration 1e30s -o s.jtr
expect 2 'stream' -- "$JT" synth 'periodic:period=1ms,dur=10us' --duration 1s --streams 0 -o s.jtr
expect 2 'GiB' -- "$JT" synth 'periodic:period=1ms,dur=10us' --duration 10s --streams 1000000000 -o s.jtr
group "jitter-trace synth: a zero or negative rate and period (period=0, rate=0/s, rate=-5/s)"
expect 2 'period' -- "$JT" synth 'periodic:period=0,dur=10us' --duration 1s -o s.jtr
expect 2 'rate' -- "$JT" synth 'poisson:rate=0/s,dur=exp:2us' --duration 1s -o s.jtr
expect 2 'rate|-5' -- "$JT" synth 'poisson:rate=-5/s,dur=exp:2us' --duration 1s -o s.jtr
group "jitter-trace compare: a trace with 0 detours; a missing second trace"
expect 2 'no detours' -- "$JT" compare "$F/zero.jtr" "$F/good.jtr"
expect 2 'nope' -- "$JT" compare "$F/good.jtr" "$F/nope.jtr"
group "jitter-trace compare: a trace with itself (a stated result: distances 0)"
expect 0 'KS' -- "$JT" compare "$F/good.jtr" "$F/good.jtr"
group "jitter-trace plot: --kind bogus; density/cdf of a 0-detour trace (timeseries: its quiet line)"
expect 2 'bogus' -- "$JT" plot "$F/good.jtr" --kind bogus -o p.svg
expect 2 'zero.jtr has no detours' -- "$JT" plot "$F/zero.jtr" -o p.svg
expect 2 'zero.jtr has no detours' -- "$JT" plot "$F/good.jtr" "$F/zero.jtr" --kind cdf -o p.svg
expect 0 'wrote p.svg' --leaves p.svg -- "$JT" plot "$F/zero.jtr" --kind timeseries -o p.svg
group "jitter-trace nodes: a lossy node among good ones (UNUSABLE, no numbers)"
expect 0 'UNUSABLE' -- "$JT" nodes "$F/good.jtr" "$F/good2.jtr" "$F/lossy.jtr"
group "jitter-trace nodes: a missing trace; --min-noise-pp 200; --z -1 / nan"
expect 2 'nope' -- "$JT" nodes "$F/good.jtr" "$F/nope.jtr"
expect 2 'min-noise-pp' -- "$JT" nodes "$F/good.jtr" "$F/good2.jtr" --min-noise-pp 200
expect 2 '(--)?z' -- "$JT" nodes "$F/good.jtr" "$F/good2.jtr" --z=-1
expect 2 '(--)?z' -- "$JT" nodes "$F/good.jtr" "$F/good2.jtr" --z nan
group "jitter-trace attribution/filter/advice/diff: a trace without its .attr.json"
expect 2 'attr.json' -- "$JT" attribution "$F/good.jtr"
expect 2 'attr.json' -- "$JT" filter "$F/good.jtr" --drop timer -o f.jtr
expect 2 'attr.json' -- "$JT" advice "$F/good.jtr"
expect 2 'attr.json' -- "$JT" diff "$F/good.jtr" "$F/good2.jtr"
group "jitter-trace attribution: a damaged .attr.json sidecar"
cp "$F/good.jtr" "$W/att.jtr" && echo '{"broken' >"$W/att.jtr.attr.json"
expect 2 'attr.json' -- "$JT" attribution "$W/att.jtr"
group "jitter-trace perfetto: --window 5s..5s, --window x..y, --max-slices 0, -o a directory"
expect 2 'window' -- "$JT" perfetto "$F/good.jtr" --window 5s..5s -o p.json
expect 2 'window|x' -- "$JT" perfetto "$F/good.jtr" --window x..y -o p.json
expect 2 'max-slices' -- "$JT" perfetto "$F/good.jtr" --max-slices 0 -o p.json
expect 2 'director' -- "$JT" perfetto "$F/good.jtr" -o "$F/adir.json"

group "every binary: a missing required argument is named on the one error line"
expect 2 'not provided: --duration' -- "$JT" synth 'periodic:period=1ms,dur=10us' -o s.jtr
expect 2 'not provided: --min-sleep' -- "$JT" merge "$F/good.jtr" -o m.jtr
expect 2 'not provided: --trace' -- "$RB" predict --ranks 2
expect 2 'not provided: --trace' -- "$RB" choose-scale
expect 2 'not provided: --cpu' -- "$JI" --trace "$F/good.jtr"
expect 2 'not provided: --trace' -- "$JE" fidelity

# ==== jitter-collect ==========================================================================
group "jitter-collect: -d 0, -d -1s, -d nan, -d 1e30s"
expect '[12]' 'duration|0' -- "$JC" -d 0 -o c.jtr
expect '[12]' 'duration|-1s' -- "$JC" -d=-1s -o c.jtr
expect '[12]' 'duration|nan' -- "$JC" -d nan -o c.jtr
expect '[12]' 'too long' -- "$JC" -d 1e30s -o c.jtr
group "jitter-collect: -d 1ns (a probe that observed nanoseconds; trace kept)"
expect 1 'implausible' --leaves c.jtr -- "$JC" --cpus 0 -d 1ns -o c.jtr
group "jitter-collect: --ring 2 --drain-ms 0 -d 1s (lost detours: exit 1, trace kept)"
expect 1 'dropped.*--ring' --leaves c.jtr -- "$JC" --cpus 0 --ring 2 --drain-ms 0 -d 1s -o c.jtr
[[ -z $WHY && -z $SKIP && ! -s $O/c.jtr ]] && fail "the lossy collection left no trace"
group "jitter-collect: --ring 1, 2^40; --t-min-reads 0; --drain-ms 2^64-1"
expect 1 'ring' -- "$JC" --cpus 0 --ring 1 -d 1s -o c.jtr
expect 1 'ring' -- "$JC" --cpus 0 --ring 1099511627776 -d 1s -o c.jtr
expect 1 't-min-reads' -- "$JC" --cpus 0 --t-min-reads 0 -d 1s -o c.jtr
expect 1 'drain-ms' -- "$JC" --cpus 0 --drain-ms 18446744073709551615 -d 1s -o c.jtr
group "jitter-collect: --cpus 4095, --cpus 0,0, --cpus ''"
expect 1 'CPU 4095' -- "$JC" --cpus 4095 -d 1s -o c.jtr
expect 1 'twice' -- "$JC" --cpus 0,0 -d 1s -o c.jtr
expect 1 'CPU list is empty' -- "$JC" --cpus '' -d 1s -o c.jtr
group "jitter-collect --check: --cpus 4095"
expect 1 'CPU 4095' -- "$JC" --check --cpus 4095
group "jitter-collect: --khz 1000000 (a wrong counter frequency)"
expect 1 'khz' -- "$JC" --cpus 0 --khz 1000000 -d 1s -o c.jtr
group "jitter-collect: --khz 0"
expect 1 'khz' -- "$JC" --cpus 0 --khz 0 -d 1s -o c.jtr
group "jitter-collect: -o a directory, x.csv, a missing folder, /proc (unwritable)"
expect 1 'director' -- "$JC" --cpus 0 -d 1s -o "$F/adir.jtr"
expect 1 'csv' -- "$JC" --cpus 0 -d 1s -o x.csv
expect 1 'does not exist|No such file' -- "$JC" --cpus 0 -d 1s -o no/such/c.jtr
expect 1 'proc' -- "$JC" --cpus 0 -d 1s -o /proc/sweep-c.jtr
group "jitter-collect: --threshold-ns 1 with -o an existing file (kept)"
cp "$F/good.jtr" "$W/keep.jtr"
expect 1 'resolve' --same "$W/keep.jtr" -- "$JC" --cpus 0 --threshold-ns 1 -d 1s -o "$W/keep.jtr"
group "jitter-collect: --sched fifo without --duration"
expect 1 'duration' -- "$JC" --cpus 0 --sched fifo --detours 10 -o c.jtr

# ==== jitter-emulate / jitter-inject ==========================================================
group "jitter-inject: a missing, empty, truncated, damaged, lossy trace"
expect 1 'nope' -- "$JI" --trace "$F/nope.jtr" --cpu 1
expect 1 'empty' -- "$JI" --trace "$F/empty.jtr" --cpu 1
expect 1 'truncated|ends inside' -- "$JI" --trace "$F/trunc.jtr" --cpu 1
expect 1 'damaged' -- "$JI" --trace "$F/damaged.jtr" --cpu 1
expect 1 'dropped' -- "$JI" --trace "$F/lossy.jtr" --cpu 1
group "jitter-inject: --scale 0, 1e19, nan, -1"
expect '[12]' 'scale' -- "$JI" --trace "$F/good.jtr" --cpu 1 --scale 0
expect '[12]' 'scale' -- "$JI" --trace "$F/good.jtr" --cpu 1 --scale 1e19
expect '[12]' 'scale' -- "$JI" --trace "$F/good.jtr" --cpu 1 --scale nan
expect '[12]' 'scale' -- "$JI" --trace "$F/good.jtr" --cpu 1 --scale=-1
group "jitter-inject: --cpu 4095; --stream 9 of a 2-stream trace"
expect 1 '4095' -- "$JI" --trace "$F/good.jtr" --cpu 4095
expect 1 'stream' -- "$JI" --trace "$F/good.jtr" --cpu 1 --stream 9
group "jitter-inject: a trace with 0 detours; one with no streams"
expect 1 'no records: nothing to replay' -- "$JI" --trace "$F/zero.jtr" --cpu 1
expect 1 'stream 0|no streams' -- "$JI" --trace "$F/nostreams.jtr" --cpu 1
group "jitter-inject: --priority 1, 100; --duration 0, -1s"
expect '[12]' 'priority' -- "$JI" --trace "$F/good.jtr" --cpu 1 --priority 1
expect '[12]' 'priority' -- "$JI" --trace "$F/good.jtr" --cpu 1 --priority 100
expect '[12]' 'duration' -- "$JI" --trace "$F/good.jtr" --cpu 1 --duration 0
expect '[12]' 'duration|-1s' -- "$JI" --trace "$F/good.jtr" --cpu 1 --duration=-1s
group "jitter-emulate calibrate: a corrupt calibration cache (names --refresh)"
host=$(hostname) kern=$(uname -r)
expect 1 'refresh' --leaves c -- bash -c "mkdir -p c/jitterbench && : >c/jitterbench/calibration-$host-$kern.json && XDG_CACHE_HOME=\$PWD/c exec $JE calibrate"
group "jitter-emulate drift: --period-us 0; --run-us 100 --period-us 10"
expect 1 'period-us' -- "$JE" drift --period-us 0
expect 1 'run-us' -- "$JE" drift --run-us 100 --period-us 10
group "jitter-emulate fidelity: --json a directory; --save a file; a damaged trace"
expect 1 'director' -- "$JE" fidelity --trace "$F/good.jtr" --json "$F/adir.json"
expect 1 'damaged' -- "$JE" fidelity --trace "$F/damaged.jtr"

# ==== replay-bench predict ====================================================================
group "replay-bench predict: a missing, empty, foreign, directory trace"
expect 1 'nope' -- "$RB" predict --trace "$F/nope.jtr" --ranks 2 --phases 10
expect 1 'empty' -- "$RB" predict --trace "$F/empty.jtr" --ranks 2 --phases 10
expect 1 'not a .jtr' -- "$RB" predict --trace "$F/elf.jtr" --ranks 2 --phases 10
expect 1 'director' -- "$RB" predict --trace "$F/adir.jtr" --ranks 2 --phases 10
group "replay-bench predict: a truncated, damaged, lossy trace (refused before simulating)"
expect 1 'truncated|ends inside' -- "$RB" predict --trace "$F/trunc.jtr" --ranks 2 --phases 10
expect 1 'damaged' -- "$RB" predict --trace "$F/damaged.jtr" --ranks 2 --phases 10
expect 1 'dropped' -- "$RB" predict --trace "$F/lossy.jtr" --ranks 2 --phases 10
group "replay-bench predict --salvage: a lossy trace (table and the share kept)"
expect 0 'share kept' -- "$RB" predict --trace "$F/lossy.jtr" --ranks 2 --phases 10 --salvage
group "replay-bench predict: a trace with 0 detours (nothing to replay); one with no streams"
expect 1 'no records: nothing to replay' -- "$RB" predict --trace "$F/zero.jtr" --ranks 2 --phases 10 --sync none
expect 1 'no streams' -- "$RB" predict --trace "$F/nostreams.jtr" --ranks 2 --phases 10 --sync none
group "replay-bench predict: a 1-detour trace (no NaN, no negative SD)"
expect 0 'SD' -- "$RB" predict --trace "$F/one.jtr" --ranks 2 --phases 10 --sync none
grep -qiE '\bnan\b|\binf\b|-[0-9.]+ %' "$W/stdout" && fail "predict of 1 detour printed $(grep -m1 -iE 'nan|inf|-[0-9.]+ %' "$W/stdout")"
group "replay-bench predict: --threads 0, 100000"
expect 1 'threads' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --threads 0
expect 1 'threads' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --threads 100000
group "replay-bench predict: --ranks 0, 4,2 (not increasing), 10^12, abc"
expect 2 'ranks|0' -- "$RB" predict --trace "$F/good.jtr" --ranks 0 --phases 10
expect 2 'increas' -- "$RB" predict --trace "$F/good.jtr" --ranks 4,2 --phases 10
expect 1 'ranks|budget|force|memory|shrink' -- "$RB" predict --trace "$F/good.jtr" --ranks 1000000000000 --phases 10
expect 2 'abc' -- "$RB" predict --trace "$F/good.jtr" --ranks abc --phases 10
group "replay-bench predict: --phases 0, 10^15"
expect '[12]' 'phases' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 0
expect 1 'phases|budget|force|shrink' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 1000000000000000
group "replay-bench predict: --quanta 0, -1ms, nan, 2d"
expect 2 'quanta' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --quanta 0
expect 2 'quanta|-1ms' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --quanta=-1ms
expect 2 'quanta|nan' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --quanta nan
expect 2 'limit' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --quanta 2d
group "replay-bench predict: --scale 1e15, nan, 0; --fraction 0, 2"
expect '[12]' 'scale' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --scale 1e15
expect '[12]' 'scale' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --scale nan
expect '[12]' 'scale' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --scale 0
expect '[12]' 'fraction' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --fraction 0
expect '[12]' 'fraction' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --fraction 2
group "replay-bench predict --app: a missing, foreign, directory, loopless profile; --quanta with --app"
expect 1 'cannot read the profile' -- "$RB" predict --app "$F/nope.json" --trace "$F/good.jtr" --ranks 2 --phases 10
expect 1 'not a profile' -- "$RB" predict --app "$F/notreport.json" --trace "$F/good.jtr" --ranks 2 --phases 10
expect 1 'cannot read the profile' -- "$RB" predict --app "$F/adir.json" --trace "$F/good.jtr" --ranks 2 --phases 10
expect 1 'no main loop found' -- "$RB" predict --app "$F/loopless.json" --trace "$F/good.jtr" --ranks 2 --phases 10
expect 2 'quanta' -- "$RB" predict --app "$F/loopless.json" --trace "$F/good.jtr" --ranks 2 --quanta 1ms
group "replay-bench predict --app --runs-of: a missing or foreign app report; without --app; beside --draws"
expect 1 'runs-of: cannot read' -- "$RB" predict --app "$F/loopless.json" --trace "$F/good.jtr" --ranks 2 --runs-of "$F/nope.json"
expect 1 'not a replay-bench app report' -- "$RB" predict --app "$F/loopless.json" --trace "$F/good.jtr" --ranks 2 --runs-of "$F/notreport.json"
expect 2 'app' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --runs-of "$F/notreport.json"
expect 2 'draws' -- "$RB" predict --app "$F/loopless.json" --trace "$F/good.jtr" --ranks 2 --runs-of "$F/notreport.json" --draws 3
group "replay-bench predict: --barrier-stage-ns 2^64, nan, -1; --logp-o-ns nan"
expect 1 'barrier-stage-ns' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --barrier-stage-ns 18446744073709551615
expect 1 'barrier-stage-ns' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --barrier-stage-ns nan
expect 1 'barrier-stage-ns' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --barrier-stage-ns=-1
expect '[12]' 'logp-o-ns' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --logp-o-ns nan
group "replay-bench predict: --sync none,none; --sync bogus; --draws 0"
expect 1 'twice' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --sync none,none
expect 2 'bogus' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --sync bogus
expect 2 'draws|0' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --draws 0
group "replay-bench predict: --precision 0%, 2, 1%,2%, -1pp, beside --phases; --max-time 0s; --max-phases 0"
expect 2 'precision' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --precision 0%
expect 2 'unit' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --precision 2
expect 2 'one relative' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --precision 1%,2%
expect 2 'precision' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --precision=-1pp
expect 2 'phases' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --precision 2% --phases 10
expect 2 'max-time' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --max-time 0s
expect 2 'max-phases' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --max-phases 0
group "replay-bench predict: -o a directory, --plot in a missing folder, -o r.csv, -o /proc"
expect 1 'director' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 -o "$F/adir.json"
expect 1 'does not exist' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --plot no/p.svg
expect 1 'csv' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 -o r.csv
expect 1 'proc' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 -o /proc/sweep-r.json
group "replay-bench predict: --platform of a corrupt or missing calibration file"
expect 1 'notreport|calibration|JSON|json' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --platform "$F/notreport.json"
expect 1 'nope' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --platform "$F/nope.json"
group "replay-bench predict --windows-of: a prediction (not a run); with --ranks; an empty file"
expect 1 'run|windows' -- "$RB" predict --trace "$F/good.jtr" --windows-of "$F/p.json"
expect 2 'ranks|windows-of' -- "$RB" predict --trace "$F/good.jtr" --windows-of "$F/p.json" --ranks 2
expect 1 'empty.jtr|EOF|empty' -- "$RB" predict --trace "$F/good.jtr" --windows-of "$F/empty.jtr"
group "replay-bench predict: --platform-noise with S ≠ 1 (conflicting); a damaged platform trace"
expect 1 'platform-noise' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --platform-noise "$F/good2.jtr" --scale 2
expect 1 'damaged' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --platform-noise "$F/damaged.jtr" --timer abstime
group "replay-bench predict: --node-traces with a missing file; --ranks-per-node 3 > streams"
expect 1 'nope' -- "$RB" predict --node-traces "$F/good.jtr,$F/nope.jtr" --ranks 2 --phases 10
expect 1 'ranks-per-node' -- "$RB" predict --node-traces "$F/good.jtr,$F/good2.jtr" --ranks-per-node 3 --ranks 6 --phases 10
group "replay-bench whatif: a trace without attribution"
expect 1 'attr.json' -- "$RB" whatif --trace "$F/good.jtr" --ranks 2

# ==== replay-bench compare / plot-study / study / choose-scale ================================
group "replay-bench compare: a missing report, an empty file, a .jtr, JSON of something else"
expect 1 'nope' -- "$RB" compare "$F/p.json" "$F/nope.json"
expect 1 'empty' -- "$RB" compare "$F/p.json" "$F/empty.jtr"
expect 1 'good.jtr' -- "$RB" compare "$F/p.json" "$F/good.jtr"
expect 1 'notreport' -- "$RB" compare "$F/p.json" "$F/notreport.json"
group "replay-bench compare: reports of different traces that share a name; different quanta"
expect 1 'contents differ' -- "$RB" compare "$F/p.json" "$F/p-other.json"
expect 1 'quanta differ' -- "$RB" compare "$F/p.json" "$F/p-q2.json"
group "replay-bench compare: no common row"
expect 1 'nothing to compare' -- "$RB" compare "$F/p.json" "$F/p-far.json"
group "replay-bench compare: a report with itself (a stated result: every difference 0)"
expect 0 '0\.000 %' -- "$RB" compare "$F/p.json" "$F/p.json"
group "replay-bench plot-study: mismatched reports; --svg a directory; no report"
expect 1 'contents differ' -- "$RB" plot-study "$F/p.json" "$F/p-other.json"
expect 1 'director' -- "$RB" plot-study "$F/p.json" --svg "$F/adir.svg"
expect 2 'required|report' -- "$RB" plot-study
group "replay-bench plot-study: a damaged report (a truncated JSON file)"
head -c 200 "$F/p.json" >"$W/cut.json"
expect 1 'cut.json' -- "$RB" plot-study "$W/cut.json"
group "replay-bench study: --dir missing, a file, an empty folder"
expect 1 'nope' -- "$RB" study --dir "$F/nope"
expect 1 'good.jtr|folder|director' -- "$RB" study --dir "$F/good.jtr"
expect 1 'adir|trace|nothing|report' -- "$RB" study --dir "$F/adir"
group "replay-bench choose-inject: no --calibration; a lossy trace"
expect 2 'not provided: --calibration' -- "$RB" choose-inject --trace "$F/good.jtr"
expect 1 'dropped' -- "$RB" choose-inject --trace "$F/lossy.jtr" --calibration "$F/cal.json"
group "replay-bench choose-scale: --max 0, --share 0 / 1.5 / nan, a lossy trace"
expect 1 'max' -- "$RB" choose-scale --trace "$F/good.jtr" --calibration "$F/cal.json" --max 0
expect '[12]' 'share' -- "$RB" choose-scale --trace "$F/good.jtr" --calibration "$F/cal.json" --share 1.5
expect '[12]' 'share' -- "$RB" choose-scale --trace "$F/good.jtr" --calibration "$F/cal.json" --share nan
expect '[12]' 'share' -- "$RB" choose-scale --trace "$F/good.jtr" --calibration "$F/cal.json" --share 0
expect 1 'dropped' -- "$RB" choose-scale --trace "$F/lossy.jtr" --calibration "$F/cal.json"
group "replay-bench choose-scale: --max too small names the S needed; beyond the cap says so"
expect 1 'raise --max to [0-9]+.*allow-capped' -- "$RB" choose-scale --trace "$F/short.jtr" --calibration "$F/cal.json" --share 0.5 --max 2
expect 1 'beyond the largest scale a replay accepts.*allow-capped' -- "$RB" choose-scale --trace "$F/short.jtr" --calibration "$F/cal.json" --share 0.999 --max 2

# ==== replay-bench validate / app =============================================================
group "replay-bench validate: --dir a file; -o a directory; a lossy trace (before any run)"
expect 1 'not a folder' -- "$RB" validate --trace "$F/good.jtr" --dir "$F/good2.jtr" --period 1s
expect 1 'director' -- "$RB" validate --trace "$F/good.jtr" -o "$F/adir.json" --period 1s
expect 1 'dropped' -- "$RB" validate --trace "$F/lossy.jtr" --period 1s --dir v
group "replay-bench validate / app: --inject bogus"
expect 2 'inject' -- "$RB" validate --trace "$F/good.jtr" --inject bogus --period 1s
expect 2 'inject' -- "$RB" app --trace "$F/good.jtr" --inject bogus -- true
group "replay-bench app: --runs 1, --np 0, --metric without a group, a missing library, no command"
expect '[12]' 'runs' -- "$RB" app --trace "$F/good.jtr" --runs 1 -- true
expect '[12]' 'np' -- "$RB" app --trace "$F/good.jtr" --np 0 -- true
expect '[12]' 'metric|group' -- "$RB" app --trace "$F/good.jtr" --metric 'x' -- true
expect '[12]' 'library|nope' -- "$RB" app --trace "$F/good.jtr" --library "$F/nope.so" -- true
expect 2 'command|required' -- "$RB" app --trace "$F/good.jtr"
group "replay-bench app: a damaged, lossy trace; -o a directory (before any run); --timeout 0"
expect 1 'damaged.*--salvage' -- "$RB" app --trace "$F/damaged.jtr" --library "$PRELOAD" -- true
expect 1 'dropped.*--salvage' -- "$RB" app --trace "$F/lossy.jtr" --library "$PRELOAD" -- true
expect 1 'director' -- "$RB" app --trace "$F/good.jtr" --library "$PRELOAD" -o "$F/adir.json" -- true
expect '[12]' 'timeout' -- "$RB" app --trace "$F/good.jtr" --library "$PRELOAD" --timeout 0 -- true

# ==== replay-bench run (mpirun -np 1) =========================================================
RUN=("${MPIRUN[@]}" "$RB" run --noise-probe 0 --warmup 0)
mpi_group() { group "$1"; ((HAVE_MPI)) || skip_group "(no mpirun/mpicc)"; }
mpi_group "replay-bench run: a missing, damaged, lossy trace (refused before the benchmark)"
expect 1 'nope' --mpi -- "${RUN[@]}" --trace "$F/nope.jtr" --period 1s
expect 1 'damaged' --mpi -- "${RUN[@]}" --trace "$F/damaged.jtr" --period 1s
expect 1 'dropped' --mpi -- "${RUN[@]}" --trace "$F/lossy.jtr" --period 1s
mpi_group "replay-bench run: -o a directory, --phases-csv in a missing folder, -o /proc"
expect 1 'director' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period 1s -o "$F/adir.json"
expect 1 'does not exist' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period 1s --phases-csv no/x.csv
expect 1 'proc' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period 1s -o /proc/sweep-r.json
mpi_group "replay-bench run: --period 0, -1s, nan, 2d; --quanta 0"
expect 2 'period' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period 0
expect 2 'period|-1s' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period=-1s
expect 2 'period|nan' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period nan
expect 2 'limit' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period 2d
expect 2 'quanta' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --quanta 0
mpi_group "replay-bench run: --scale 1e300, --phases 0, --phases 10^12 (beyond a day), --block-phases 0"
expect 2 'scale' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --scale 1e300
expect 2 'phases' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --phases 0
expect 1 'day|limit' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --phases 1000000000000
expect 2 'block-phases' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --block-phases 0
mpi_group "replay-bench run: conflicting flags (--until-verdict with --phases; --virtual-ranks with paired)"
expect 2 'until-verdict|phases' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --until-verdict --phases 10
expect 1 'virtual-ranks|sequential|paired' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --design paired --virtual-ranks 2 --period 1s
mpi_group "replay-bench run: --inject bogus; --inject boundary with the signal injector's --overhead or --timer"
expect 2 'inject' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --inject bogus
expect 1 'signal injector' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --inject boundary --overhead 5us --period 1s
expect 1 'signal injector' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --inject boundary --timer itimer --period 1s
mpi_group "replay-bench run: --baseline of a missing or foreign file"
expect 1 'nope' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --design sequential --baseline "$F/nope.json" --period 1s
expect 1 'notreport|baseline' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --design sequential --baseline "$F/notreport.json" --period 1s
mpi_group "replay-bench run: --calibration of a corrupt file"
expect 1 'calibration|notreport|json|JSON' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --period 1s --calibration "$F/notreport.json"

# ==== libjitter_preload.so under mpirun -np 1 ================================================
preload() { # preload RC REGEX VAR=VALUE... : one case of the library's settings
    local want=$1 re=$2
    shift 2
    local -a pass=(-x LD_PRELOAD -x JITTER_STATS_DIR) v
    for v in "$@"; do pass+=(-x "${v%%=*}"); done
    expect "$want" "$re" --mpi -- env LD_PRELOAD="$PRELOAD" JITTER_STATS_DIR=stats "$@" \
        "${MPIRUN[@]}" "${pass[@]}" "$F/app" 1000 5 0
}
mpi_group "libjitter_preload.so: JITTER_TRACE empty, missing, a directory"
preload 1 'JITTER_TRACE.*empty' JITTER_TRACE=
preload 1 'nope' JITTER_TRACE="$F/nope.jtr"
preload 1 'adir|director' JITTER_TRACE="$F/adir"
mpi_group "libjitter_preload.so: a truncated, damaged, lossy trace (JITTER_SALVAGE names)"
preload 1 '(truncated|ends inside).*JITTER_SALVAGE' JITTER_TRACE="$F/trunc.jtr"
preload 1 'damaged.*JITTER_SALVAGE' JITTER_TRACE="$F/damaged.jtr"
preload 1 'dropped.*JITTER_SALVAGE' JITTER_TRACE="$F/lossy.jtr"
mpi_group "libjitter_preload.so: JITTER_SCALE 0, nan, abc, 1e19"
preload 1 'JITTER_SCALE' JITTER_TRACE="$F/good.jtr" JITTER_SCALE=0
preload 1 'JITTER_SCALE' JITTER_TRACE="$F/good.jtr" JITTER_SCALE=nan
preload 1 'JITTER_SCALE' JITTER_TRACE="$F/good.jtr" JITTER_SCALE=abc
preload 1 'JITTER_SCALE|scale' JITTER_TRACE="$F/good.jtr" JITTER_SCALE=1e19
mpi_group "libjitter_preload.so: JITTER_SYNC bogus, every:0; JITTER_TIMER bogus"
preload 1 'JITTER_SYNC' JITTER_TRACE="$F/good.jtr" JITTER_SYNC=bogus
preload 1 'JITTER_SYNC|every' JITTER_TRACE="$F/good.jtr" JITTER_SYNC=every:0
preload 1 'JITTER_TIMER' JITTER_TRACE="$F/good.jtr" JITTER_TIMER=bogus
mpi_group "libjitter_preload.so: JITTER_RANKS_PER_NODE 0, 9 (above the streams), abc; JITTER_SEED abc"
preload 1 'JITTER_RANKS_PER_NODE' JITTER_TRACE="$F/good.jtr" JITTER_RANKS_PER_NODE=0
preload 1 'JITTER_RANKS_PER_NODE|streams' JITTER_TRACE="$F/good.jtr" JITTER_RANKS_PER_NODE=abc
preload 1 'JITTER_SEED' JITTER_TRACE="$F/good.jtr" JITTER_SEED=abc
mpi_group "libjitter_preload.so: JITTER_INJECT bogus"
preload 1 'JITTER_INJECT' JITTER_TRACE="$F/good.jtr" JITTER_INJECT=bogus
mpi_group "libjitter_preload.so: JITTER_SALVAGE yes"
preload 1 'JITTER_SALVAGE' JITTER_TRACE="$F/good.jtr" JITTER_SALVAGE=yes
mpi_group "libjitter_preload.so: JITTER_STATS_DIR an existing file (checked at MPI_Init, not lost at the end)"
preload 1 'JITTER_STATS_DIR|statsfile' JITTER_TRACE="$F/long.jtr" JITTER_STATS_DIR="$F/good2.jtr"
mpi_group "libjitter_preload.so: a trace with 0 detours"
preload 1 'no records: nothing to replay' JITTER_TRACE="$F/zero.jtr"

# ==== the input classes: each through its one mechanism (docs/RELIABILITY.md, by class) =====
group "class O, outputs before the work: another format's name (perfetto -o p.jtr, profile goal -o x.csv, whatif --csv w.json)"
expect 2 'name ends in .jtr; name it .json' -- "$JT" perfetto "$F/good.jtr" -o p.jtr
expect 1 'name ends in .csv; name it .goal' -- "$RB" profile goal "$F/nope.json" --ranks 4 -o x.csv
expect 1 'name ends in .json; name it .csv' -- "$RB" whatif --trace "$F/nope.jtr" --ranks 2 --csv w.json
group "class O, outputs before the work: a sidecar path that is a directory (filter -o, collect --attribute)"
((ATTR)) || skip_group "(no attributed fixture: tracefs?)"
mkdir -p "$W/side/x.jtr.attr.json"
expect 2 'x.jtr.attr.json is a directory' -- "$JT" filter "$F/attr.jtr" --drop timer -o "$W/side/x.jtr"
expect 1 'x.jtr.attr.json is a directory' --limit 10 -- "$JC" --attribute --cpus 0 -d 5s -o "$W/side/x.jtr"
group "class O, outputs before the work: a full file system; a file size limit (an error line, not SIGXFSZ)"
((SMALL)) || skip_group "(cannot mount a tmpfs: not root)"
expect 2 'free some space' -- "$JT" convert "$F/good.jtr" -o "$W/full/x.csv"
expect 1 'free some space' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 -o "$W/full/p.json"
expect 2 'File too large' -- bash -c "ulimit -f 8; exec $JT synth 'periodic:period=100us,dur=5us' --duration 10s -o s.jtr"
group "class N, names that must exist: filter --drop task:nope, --keep nosuch; perfetto --window past the end; attribution --bucket of no detour; synth phase ≥ duration; daemon --cpu 4095"
((ATTR)) || skip_group "(no attributed fixture: tracefs?)"
expect 2 'has no source `task:nope` \(it has' -- "$JT" filter "$F/attr.jtr" --drop task:nope -o f.jtr
expect 2 'has no source `nosuch`' -- "$JT" filter "$F/attr.jtr" --keep nosuch -o f.jtr
expect 2 'the window holds none of it' -- "$JT" perfetto "$F/good.jtr" --window 100s..200s -o p.json
expect 2 'none of the [0-9]+ detours of .* has a run-time in it' -- "$JT" attribution "$F/attr.jtr" --bucket 1s..2s
expect 2 'phase 5.000 s: .* so the source would make no detour' -- "$JT" synth 'periodic:period=1ms,dur=10us,phase=5s' --duration 2s -o s.jtr
expect 1 '--cpu 4095: CPU 4095 does not exist' -- "$JC" daemon --cpu 4095 --period 1ms --busy 10us --duration 1s
group "class S, inputs named for what they are: a .jtr named .csv, a CSV named .jtr, a .jtr as a profile, a prediction as --runs-of/--platform"
expect 2 'this is a .jtr trace, not CSV: name it .jtr, or give --from jtr' -- "$JT" stats "$F/jtr-named.csv"
expect 2 'this is text .*, not a .jtr trace: jitter-trace convert' -- "$JT" stats "$F/csv-named.jtr"
expect 1 'this is a .jtr trace, not an application profile' -- "$RB" profile show "$F/good.jtr"
expect 1 'this is a prediction report .*, not an application study' -- "$RB" predict --app "$F/loopless.json" --trace "$F/good.jtr" --ranks 2 --runs-of "$F/p.json"
expect 1 'this is a .jtr trace, not a platform file' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --platform "$F/good.jtr"
mpi_group "class S, inputs named for what they are: run --baseline of a prediction; JITTER_TRACE of a CSV"
expect 1 'this is a prediction report .*, not a run.s report' --mpi -- "${RUN[@]}" --trace "$F/good.jtr" --design sequential --baseline "$F/p.json" --period 1s
preload 1 'this is text .*, not a .jtr trace' JITTER_TRACE="$F/good.csv"
group "class D, figures the input supports: a one-row CSV (no rate or noise), --scale 1e300, 0 detours (choose-scale, app), a busy --platform-noise"
expect 0 'rate and noise not measured' -- "$JT" stats "$F/one-row.csv"
grep -E '^noise' "$W/stdout" | grep -qE '[0-9]' && fail "a one-row CSV printed a noise share"
expect 2 'scale 1e300 must be a finite number in \(0, 1000\]' -- "$JT" stats "$F/good.jtr" --overhead 10us --scale 1e300
expect 1 'has no detours: no scale makes any of them injectable' -- "$RB" choose-scale --trace "$F/zero.jtr" --calibration "$F/cal.json"
expect 1 'has no detours: the library would refuse it in every run' -- "$RB" app --trace "$F/zero.jtr" --library "$PRELOAD" --platform-probe 0s -- true
expect 1 '--platform-noise .*busy.jtr: CPU 0: 99.0 %' -- "$RB" predict --trace "$F/good.jtr" --ranks 2 --phases 10 --platform-noise "$F/busy.jtr"
group "class D, a metric's sign before a verdict: app --metric of a negative value stops at the run"
expect 1 "--metric captured '-6.25': a metric is a time" -- "$RB" app --trace "$F/long.jtr" --library "$PRELOAD" --platform-probe 0s --runs 2 --warmup 0 --metric 'time: (\S+)' -- sh -c 'echo time: -6.25'
mpi_group "class P, the preload library's profile: a 1 MiB file system, a directory, app.csv, a full JITTER_STATS_DIR (at MPI_Init, no signal)"
((SMALL)) || skip_group "(cannot mount a tmpfs: not root)"
preload 1 'JITTER_PROFILE=.*tiny/app.json \(the record of 1 rank, [0-9.]+ MB each, and the profile\): .* free some space' JITTER_PROFILE="$W/tiny/app.json"
preload 1 'JITTER_PROFILE .* is a directory, not an output file' JITTER_PROFILE="$F/adir"
preload 1 'JITTER_PROFILE .*app.csv: this writes a JSON profile' JITTER_PROFILE="$W/app.csv"
preload 1 'JITTER_STATS_DIR .*: 1 B is needed' JITTER_TRACE="$F/long.jtr" JITTER_STATS_DIR="$W/full/stats"
expect 1 'above this process.s file size limit' --mpi --leaves prof.json.ranks -- bash -c "ulimit -f 1024; exec env LD_PRELOAD=$PRELOAD JITTER_PROFILE=prof.json ${MPIRUN[*]} -x LD_PRELOAD -x JITTER_PROFILE $F/app 1000 5 0"
grep -qiE 'Bus error|signal [0-9]|core dumped' "$W/stderr" && fail "a rank died of a signal"

finish_group
echo "sweep: $BAD of $GROUPS_RUN case groups mishandled, $SKIPPED skipped"
((BAD == 0)) || exit 1
