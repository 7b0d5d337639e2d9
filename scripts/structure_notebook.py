"""The lab-notebook rule of scripts/check-structure.py (ARCHITECTURE.md, "Where to add").

Comments and string literals of non-test sources speak of the code, not of when or where it was
measured: no dates, no session names (s5, s7 …), no issue numbers, no named machines (EPYC, Xeon,
Sapphire Rapids, Zen 4, "the project VM"). A constant says what it is and where its value is
measured (a script or a test); the history goes to docs/journal, the figures to
docs/BENCHMARKS.md. Test code (`tests.rs`, `tests/`, an inline `#[cfg(test)] mod`) may name
machines and dates of the fixtures it carries.
"""
import re

PATTERNS = [
    ("date", re.compile(r"\b20\d\d-\d\d-\d\d\b")),
    ("issue number", re.compile(r"\b[Ii]ssues?\s+#?\d+|(?<![\w&])#\d{1,4}\b(?![\w\]])")),
    ("session name", re.compile(r"\b[Ss]ession\s+\d+\b|\bs\d{1,2}\b(?![-\w])")),
    ("machine name", re.compile(
        r"\b(EPYC|Xeon|Sapphire Rapids|Zen ?\d)\b"
        r"|\b(this|the project|project|our|the|Intel|AMD|2-vCPU|vCPU)\s+VM\b")),
]


def text_only(text):
    """The comments and string literals of `text`, code blanked out (newlines kept)."""
    out = []
    i, n = 0, len(text)

    def keep(a, b):
        out.append(text[a:b])

    def blank(a, b):
        out.append("\n" * text.count("\n", a, b))

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            keep(i, j)
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            keep(i, j)
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 10])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            keep(i, j)
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            keep(i, j + 1)
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                i += len(m.group(0))
                continue
        if c == "\n":
            out.append("\n")
        i += 1
    return "".join(out)


def notebook_lines(text, last_line):
    """(line number, kind, matched text) of every lab-notebook mention up to line `last_line`."""
    found = []
    for no, line in enumerate(text_only(text).split("\n")[:last_line], 1):
        for kind, pat in PATTERNS:
            m = pat.search(line)
            if m:
                found.append((no, kind, m.group(0)))
    return found
