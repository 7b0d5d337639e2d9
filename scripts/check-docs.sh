#!/usr/bin/env bash
# Checks that the reference documents stay references:
#   - ARCHITECTURE.md ≤ 350 lines, docs/BENCHMARKS.md and docs/VALIDATION.md ≤ 500 lines each;
#   - no dated heading in BENCHMARKS.md or VALIDATION.md (dated notes go to docs/journal/);
#   - every module of every crate (`mod NAME;` or `mod NAME {`, test modules named `tests`
#     aside) is named in ARCHITECTURE.md, as `NAME`, `…/NAME` or `…::NAME`;
#   - nothing tracked (the journals aside) points outside the repository (a sibling `shared`);
#   - every relative link in a tracked Markdown file (the raw data folders docs/benchmarks/ and
#     docs/validation/ aside) points at a file that exists, and every link to `FILE.md#anchor`
#     at a heading of that file.
# Prints what is wrong, one line each, and exits 1 if anything is; prints nothing and exits 0
# otherwise. Usage: scripts/check-docs.sh (from anywhere in the repository).
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
fail() {
    echo "$1"
    status=1
}

check_lines() { # file limit
    local n
    n=$(wc -l <"$1")
    if [ "$n" -gt "$2" ]; then
        fail "$1: $n lines (limit $2)"
    fi
}
check_lines ARCHITECTURE.md 350
check_lines docs/BENCHMARKS.md 500
check_lines docs/VALIDATION.md 500

for f in docs/BENCHMARKS.md docs/VALIDATION.md; do
    # Headings outside code blocks that carry a date.
    awk -v f="$f" '/^```/ { fence = !fence; next }
        !fence && /^#+ / && /[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]/ {
            print f ":" NR ": dated heading (move it to docs/journal/): " $0 }' "$f"
done >"${TMPDIR:-/tmp}/check-docs-dated.$$"
if [ -s "${TMPDIR:-/tmp}/check-docs-dated.$$" ]; then
    cat "${TMPDIR:-/tmp}/check-docs-dated.$$"
    status=1
fi
rm -f "${TMPDIR:-/tmp}/check-docs-dated.$$"

modules=$(grep -rhoE --include='*.rs' --exclude-dir=target \
    '^\s*(pub(\([a-z:]+\))? )?mod [a-z_0-9]+\s*[;{]' traces collector emulator replay-bench tests |
    sed -E 's/.*mod ([a-z_0-9]+).*/\1/' | grep -vx 'tests' | sort -u)
for m in $modules; do
    if ! grep -qE "[\`/:]${m}[\`/]" ARCHITECTURE.md; then
        fail "ARCHITECTURE.md: module \`$m\` is not named ($(grep -rlE --include='*.rs' \
            --exclude-dir=target "^\s*(pub(\([a-z:]+\))? )?mod ${m}\s*[;{]" traces collector \
            emulator replay-bench tests | tr '\n' ' '| sed 's/ $//'))"
    fi
done

# Nothing points outside the repository: a clone has no sibling `shared` folder (the journals,
# a log of the past, aside). The patterns are written so that this file does not match them.
outside=$(git ls-files -z -- ':!docs/journal/' |
    xargs -0 grep -nE '\.\./[s]hared|/work/[s]hared' 2>/dev/null || true)
if [ -n "$outside" ]; then
    while IFS= read -r line; do fail "points outside the repository: $line"; done <<<"$outside"
fi

# GitHub's heading anchors: lower case, spaces to '-', punctuation other than '-' and '_' dropped.
anchors_of() {
    awk '/^```/ { fence = !fence; next } !fence && /^#+ / { sub(/^#+ /, ""); print }' "$1" |
        tr '[:upper:]' '[:lower:]' | sed -E 's/[^[:alnum:] _-]//g; s/ /-/g'
}

# The raw data folders hold generated reports whose links point at files not kept; left out.
docs=$(git ls-files '*.md' | grep -vE '^(target/|docs/benchmarks/|docs/validation/)')
for f in $docs; do
    dir=$(dirname "$f")
    { grep -oE '\]\([^)[:space:]]+\)' "$f" || true; } | sed -E 's/^\]\((.*)\)$/\1/' |
        while read -r target; do
            case "$target" in http:* | https:* | mailto:* | \#*) continue ;; esac
            path=${target%%#*}
            anchor=""
            [ "$path" != "$target" ] && anchor=${target#*#}
            if [ -n "$path" ] && [ ! -e "$dir/$path" ]; then
                echo "$f: link to a missing file: $target"
            elif [ -n "$anchor" ] && [[ "$path" == *.md ]] &&
                ! anchors_of "$dir/$path" | grep -qxF -- "$anchor"; then
                echo "$f: link to a missing heading: $target"
            fi
        done
done >"${TMPDIR:-/tmp}/check-docs-links.$$"
if [ -s "${TMPDIR:-/tmp}/check-docs-links.$$" ]; then
    cat "${TMPDIR:-/tmp}/check-docs-links.$$"
    status=1
fi
rm -f "${TMPDIR:-/tmp}/check-docs-links.$$"

exit $status
