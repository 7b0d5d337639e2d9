#!/usr/bin/env bash
# Runs every test of the workspace. Installs what is missing first (apt-get when root; otherwise
# prints the exact command and exits non-zero). README command 2; .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
jb_setup

# Every step has a time limit (scripts/setup.sh `jb_step`; JB_STEP_TIMEOUT_SCALE=2 doubles all).
# The house's rules, before anything is built: file and function length, import circles
# (ARCHITECTURE.md, "Conventions"), and docs that name every module and link what exists.
jb_say "structure and docs"
jb_step "check-structure" 120 python3 scripts/check-structure.py
jb_step "check-docs" 120 bash scripts/check-docs.sh

jb_say "building the workspace and its tests"
jb_step build 1800 cargo build --workspace --all-targets --quiet
# What is loaded into a user's MPI job or runs on a production node carries no command-line
# parser, progress bar, thread pool, plotting or FFT (ARCHITECTURE.md, "Lean libraries"): the
# preload library none of clap, indicatif, rayon, plotters, rustfft; the collector clap and
# indicatif only as its own command line and progress bar. Checked twice: what the libraries
# depend on (`cargo tree`, the collector's library without its `cli` feature), and what the
# artefacts of the whole-workspace build above contain (the symbols of every function linked
# into them: Cargo unites features over one build, so only code no lean path reaches stays out).
jb_say "lean libraries: the preload library and the collector"
jb_step "build: jitter-trace --no-default-features" 900 \
    cargo build -p jitter-trace --no-default-features --lib --quiet
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
lean_symbols target/debug/libjitter_preload.so "clap|clap_builder|clap_lex|indicatif|rayon|rayon_core|plotters|rustfft"
lean_symbols target/debug/jitter-collect "rayon|rayon_core|plotters|rustfft"

# Pure tests run in parallel; crates whose tests read time or spin on CPUs run one test at a
# time (2 cores: timing-sensitive tests must never share the machine with each other).
# Both steps resolve features as the workspace build above does (jitter-trace with `periodogram`,
# the collector with `cli`, which `-p` of their dependents alone would not select): otherwise
# cargo rebuilds them and the crates above them a second time (minutes of CI).
jb_say "tests: the trace crates, jitter-profile, jitter-report, jitter-predict"
jb_step "tests: the trace crates, jitter-profile, jitter-report, jitter-predict" 900 \
    cargo test --quiet --no-fail-fast --features jitter-collect/default -p jitter-trace \
    -p jitter-cli -p jitter-plot -p jitter-trace-tool -p jitter-profile -p jitter-report \
    -p jitter-predict
jb_say "tests: jitter-collect, jitter-emulator (its tools, its preload library), replay-bench, end-to-end (one at a time)"
# Five crates one test at a time (the preload library's MPI test times a program under mpirun).
jb_step "tests: jitter-collect, jitter-emulator, replay-bench, end-to-end" 1800 \
    cargo test --quiet --no-fail-fast --features jitter-trace/default,jitter-collect/default \
    -p jitter-collect -p jitter-emulator -p jitter-emulator-cli -p jitter-preload -p replay-bench \
    -p jitterbench-tests -- --test-threads=1
