#!/usr/bin/env bash
# Crash safety of jitter-collect: SIGKILL at N random moments of a collection (default
# 50; each kill a fresh collector, 0–2 s after its start), then every trace left must read up to
# its last complete chunk (at most the last flush lost); also the existing-output and file size
# limit (disk full) checks. The checks are the integration tests of collector/tests/crash.rs.
# Usage: scripts/crash-test.sh   (env: KILLS=50 SEED=<u64, default: time>)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
KILLS=${KILLS:-50}
export JB_CRASH_KILLS=$KILLS
[ -n "${SEED:-}" ] && export JB_CRASH_SEED=$SEED
jb_say "building jitter-collect and its crash tests"
jb_step build 900 cargo test -q -p jitter-collect --test crash --no-run || jb_fail $? "build failed"
jb_say "crash tests: $KILLS kills (about 1.5 s each), then the existing-output and disk-full checks"
# One kill takes 0-2 s plus the collector's start; 10 s each is a generous limit.
jb_step "crash tests" $((120 + 10 * KILLS)) \
    cargo test -q -p jitter-collect --test crash -- --test-threads=1 --nocapture \
    || jb_fail $? "crash tests failed"
