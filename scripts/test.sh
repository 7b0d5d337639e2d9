#!/usr/bin/env bash
# Runs every test of the workspace. Installs what is missing first (apt-get when root; otherwise
# prints the exact command and exits non-zero). README command 2; .ci/run calls exactly this.
#
# Before the tests it prints the facts of this machine the timing-sensitive tests read (CPU,
# timer lateness, the cost of a SIGALRM, the injector's O, L and M, the probe's noise: see
# docs/RELIABILITY.md, "Machine facts of the timing-sensitive tests"); after them, the longest
# test binaries and tests with their times.
#
# A hostile machine without a second one (docs/RELIABILITY.md, "A hostile machine"):
#   --stress             a busy loop pinned to CPU 0, at the tests' own priority, for the whole run
#   --timer-slack US     every process of the run sleeps up to US µs longer (timer slack, root)
#   --slow-signals US    every SIGALRM handler spins US µs first: a build with the
#                        simulate-slow-signals feature (in target/slow-signals) and
#                        JB_SIMULATED_SIGNAL_US=US
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh

stress=0 slack_us="" slow_us=""
usage() {
    echo "usage: scripts/test.sh [--stress] [--timer-slack US] [--slow-signals US]" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
        --stress) stress=1 ;;
        --timer-slack) [ $# -ge 2 ] || usage; slack_us=$2; shift ;;
        --slow-signals) [ $# -ge 2 ] || usage; slow_us=$2; shift ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown option '$1'" >&2; usage ;;
    esac
    shift
done
for v in "$slack_us" "$slow_us"; do
    case "$v" in ''|[0-9]|[0-9][0-9]|[0-9][0-9][0-9]|1000) ;;
        *) echo "error: --timer-slack and --slow-signals take whole µs from 0 to 1000, got '$v'" >&2; exit 2 ;;
    esac
done

jb_setup

features=()
if [ -n "$slow_us" ]; then
    # Absolute: the integration tests find the binaries from CARGO_TARGET_DIR in their own folder.
    target_dir=${CARGO_TARGET_DIR:-target}
    case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
    export CARGO_TARGET_DIR="$target_dir/slow-signals" JB_SIMULATED_SIGNAL_US=$slow_us
    features=(--features jitter-emulator/simulate-slow-signals)
    jb_say "simulated slow host: every SIGALRM handler spins $slow_us µs first (build in $CARGO_TARGET_DIR)"
fi
if [ -n "$slack_us" ]; then
    if ! echo $((slack_us * 1000)) >"/proc/$$/timerslack_ns" 2>/dev/null; then
        echo "error: cannot set the timer slack of this shell (/proc/$$/timerslack_ns needs root)" >&2
        exit 1
    fi
    jb_say "timer slack: every process of this run sleeps up to $slack_us µs longer"
fi
busy=""
stop_busy() { if [ -n "$busy" ]; then kill "$busy" 2>/dev/null || true; wait "$busy" 2>/dev/null || true; busy=""; fi; }
if [ "$stress" = 1 ]; then
    taskset -c 0 bash -c 'while :; do :; done' &
    busy=$!
    jb_say "stress: a busy loop (pid $busy) pinned to CPU 0 for the whole run"
fi

# Every test binary runs under scripts/test-timer.py, which records its time (and, where its
# tests run one at a time, each test's) in this file; the summary is printed at the end, pass
# or fail.
times=$(mktemp "${TMPDIR:-/tmp}/jitterbench-test-times.XXXXXX")
export JB_TEST_TIMES=$times
triple=$(rustc -vV | sed -n 's/^host: //p')
runner_var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$triple")_RUNNER"
export "$runner_var=$PWD/scripts/test-timer.py"
finish() {
    local rc=$?
    stop_busy
    if [ -s "$times" ]; then
        jb_say "test times"
        python3 scripts/test-timer.py --summary "$times" 10 || true
    fi
    rm -f "$times"
    exit "$rc"
}
trap finish EXIT

# Every step has a time limit (scripts/setup.sh `jb_step`; JB_STEP_TIMEOUT_SCALE=2 doubles all).
# The house's rules, before anything is built: file and function length, import circles, no
# lab notebook in sources (ARCHITECTURE.md, "Where to add"), `pub` only for what another crate
# uses, and docs that name every module and link what exists.
jb_say "structure and docs"
jb_step "check-structure" 120 python3 scripts/check-structure.py
jb_step "check-pub" 120 python3 scripts/check-pub.py
jb_step "check-docs" 120 bash scripts/check-docs.sh

jb_say "building the workspace and its tests"
jb_step build 1800 cargo build --workspace --all-targets --quiet "${features[@]}"
bin=${CARGO_TARGET_DIR:-target}/debug
# What is loaded into a user's MPI job or runs on a production node carries no command-line
# parser, progress bar, thread pool, plotting or FFT (ARCHITECTURE.md, "Lean libraries"): the
# preload library none of clap, indicatif, rayon, plotters, rustfft; the collector clap and
# indicatif only as its own command line and progress bar. Checked twice: what the libraries
# depend on (`cargo tree`, the collector's library without its `cli` feature), and what the
# artefacts of the whole-workspace build above contain (the symbols of every function linked
# into them: Cargo unites features over one build, so only code no lean path reaches stays out).
jb_say "lean libraries: the preload library and the collector"
jb_step "check: jitter-trace --no-default-features" 900 \
    cargo check -p jitter-trace --no-default-features --lib --quiet
five='clap|clap_builder|clap_derive|clap_lex|indicatif|rayon|rayon-core|plotters|rustfft'
for lean in "jitter-preload" "jitter-collect --no-default-features"; do
    # shellcheck disable=SC2086
    linked=$(jb_step "cargo tree: $lean" 120 cargo tree -p $lean -e normal --prefix none) \
        || jb_fail $? "cargo tree -p $lean failed"
    if grep -E "^($five) " <<<"$linked"; then
        jb_fail 1 "the library of $lean depends on the crates above"
    fi
done
command -v nm >/dev/null || jb_fail 1 "nm (binutils) is needed to read the artefacts' symbols"
lean_symbols() { # artefact, crates it must not carry
    local found
    found=$(nm -C "$1" 2>/dev/null | grep -oE "\b($2)::" | sort | uniq -c || true)
    if [ -n "$found" ]; then
        echo "$found"
        jb_fail 1 "$1 carries code of the crates above"
    fi
}
lean_symbols "$bin/libjitter_preload.so" "clap|clap_builder|clap_lex|indicatif|rayon|rayon_core|plotters|rustfft"
lean_symbols "$bin/jitter-collect" "rayon|rayon_core|plotters|rustfft"

# The facts the timing-sensitive tests read, measured as they will measure them: a failure
# report then carries them. Informative only: a machine where one cannot be measured says so
# here and the tests that need it say what they could not do.
jb_say "this machine: the facts the timing-sensitive tests read"
printf '%-17s %s (%s online CPUs), kernel %s, load average %s\n' machine \
    "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$(nproc)" \
    "$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)"
jb_step "facts: jitter-collect --check" 60 "$bin/jitter-collect" --check \
    || echo "(jitter-collect --check exited $?: the collecting tests will say what they cannot do)"
jb_step "facts: jitter-emulate calibrate" 300 "$bin/jitter-emulate" calibrate \
    || echo "(jitter-emulate calibrate exited $?: the replaying tests will say what they cannot do)"

# One `cargo test` of the whole workspace, so that every package and dependency is resolved with
# the features of the build above and nothing is compiled twice (a `-p` subset unifies other
# features of shared dependencies, e.g. regex and syn, and rebuilt jitter-trace, its tests and
# their dependencies: minutes of CI). Pure tests run in parallel; the packages whose tests read
# time or spin on CPUs run one test at a time (scripts/test-timer.py sets RUST_TEST_THREADS=1 for
# them: 2 cores, and timing-sensitive tests must never share the machine with each other), one
# line per test with its time.
export JB_SERIAL_PACKAGES="jitter-collect jitter-emulator jitter-emulator-cli jitter-preload replay-bench jitterbench-tests"
jb_say "tests: the trace crates, jitter-profile, jitter-report, jitter-predict in parallel; $JB_SERIAL_PACKAGES one test at a time"
jb_step "tests" 2700 cargo test --workspace --no-fail-fast "${features[@]}"
