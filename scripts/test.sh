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
# What is loaded into a user's MPI job or runs on a production node links no plotting and no FFT
# (jitter-trace's `plot` and `periodogram` features stay off there), and the library builds so.
jb_say "lean libraries: jitter-trace without its default features; preload and collector without plotters and rustfft"
jb_step "build: jitter-trace --no-default-features" 900 \
    cargo build -p jitter-trace --no-default-features --lib --quiet
for crate in jitter-preload jitter-collect; do
    linked=$(jb_step "cargo tree: $crate" 120 cargo tree -p "$crate" -e normal --prefix none) \
        || jb_fail $? "cargo tree -p $crate failed"
    if grep -E '^(plotters|rustfft) ' <<<"$linked"; then
        jb_fail 1 "$crate links plotting or FFT crates (see above)"
    fi
done

# Pure tests run in parallel; crates whose tests read time or spin on CPUs run one test at a
# time (2 cores: timing-sensitive tests must never share the machine with each other).
# Both steps resolve features as the workspace build above does (jitter-trace with its default
# features, which `-p` of its dependents alone would not select): otherwise cargo rebuilds
# jitter-trace and the four crates above it a second time (minutes of CI).
jb_say "tests: jitter-trace, jitter-profile, jitter-report, jitter-predict"
jb_step "tests: jitter-trace, jitter-profile, jitter-report, jitter-predict" 900 \
    cargo test --quiet --no-fail-fast -p jitter-trace -p jitter-profile -p jitter-report \
    -p jitter-predict
jb_say "tests: jitter-collect, jitter-emulator (its tools, its preload library), replay-bench, end-to-end (one at a time)"
# Five crates one test at a time (the preload library's MPI test times a program under mpirun).
jb_step "tests: jitter-collect, jitter-emulator, replay-bench, end-to-end" 1800 \
    cargo test --quiet --no-fail-fast --features jitter-trace/default \
    -p jitter-collect -p jitter-emulator -p jitter-emulator-cli -p jitter-preload -p replay-bench \
    -p jitterbench-tests -- --test-threads=1
