"""The lab-notebook rule of scripts/check-structure.py (ARCHITECTURE.md, "Where to add").

Comments and string literals of non-test sources speak of the code, not of when or where it was
measured: no dates, no session names (s5, s7 …), no issue numbers, no named machines (EPYC, Xeon,
Sapphire Rapids, Zen 4, "the project VM"). A constant says what it is and where its value is
measured (a script or a test); the history goes to docs/journal, the figures to
docs/BENCHMARKS.md. Test code (`tests.rs`, `tests/`, an inline `#[cfg(test)] mod`) may name
machines and dates of the fixtures it carries.
"""
import re

from rust_source import prose_only

PATTERNS = [
    ("date", re.compile(r"\b20\d\d-\d\d-\d\d\b")),
    ("issue number", re.compile(r"\b[Ii]ssues?\s+#?\d+|(?<![\w&])#\d{1,4}\b(?![\w\]])")),
    ("session name", re.compile(r"\b[Ss]ession\s+\d+\b|\bs\d{1,2}\b(?![-\w])")),
    ("machine name", re.compile(
        r"\b(EPYC|Xeon|Sapphire Rapids|Zen ?\d)\b"
        r"|\b(this|the project|project|our|the|Intel|AMD|2-vCPU|vCPU)\s+VM\b")),
]


def notebook_lines(text, last_line):
    """(line number, kind, matched text) of every lab-notebook mention up to line `last_line`."""
    found = []
    for no, line in enumerate(prose_only(text).split("\n")[:last_line], 1):
        for kind, pat in PATTERNS:
            m = pat.search(line)
            if m:
                found.append((no, kind, m.group(0)))
    return found
