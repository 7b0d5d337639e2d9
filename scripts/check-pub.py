#!/usr/bin/env python3
"""Public means used elsewhere (ARCHITECTURE.md, "Where to add"): lists every `pub` item of a
library crate that no other crate names and that is not the crate's documented API.

A library crate is a workspace member with `src/lib.rs`. Its items are the `pub` fns (methods
included), structs, enums, traits, consts, statics, types and modules of the files of its
module tree (`src/` less `main.rs` and `src/bin/`); `pub(crate)`, `pub(super)`, `pub use`
re-exports and `extern "C"` / `#[no_mangle]` functions (a C ABI is API) are not counted.
Another crate names an item when the item's name appears as a word in the code of any other
crate of the workspace (its tests included): another member, this package's binaries,
integration tests, benches and examples, or the doc examples of this crate (```` ``` ```` blocks in its doc comments). The
crate's documented API is what its root doc (`//!` of lib.rs) names in backticks. An item named
by the signature of a used or documented item (a fn's parameters and result, a struct's `pub`
fields, an enum's variants, a trait's items) is reachable API and counts as used.

The search is by name, so it errs one way only: an item whose name another crate uses for
something else is counted as used (never the reverse). Test code of the crate itself (inline
`#[cfg(test)] mod`, `tests.rs`) does not count as a use.

scripts/pub-allow.txt lists items left `pub` on purpose or for now, one `crate-dir name` a
line (TEMPORARY entries for crates another branch is rewriting say so).

Prints `path:line: pub KIND NAME is used by no other crate: make it pub(crate)` per item and
exits 1 when there is any; `--summary` prints counts per crate only.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {"target", ".git", "shared"}
ITEM_RE = re.compile(
    r"^[ \t]*pub[ \t]+(?:(?:const|async|unsafe)[ \t]+)*(?:(?:extern[ \t]+\"C\")[ \t]+)?"
    r"(fn|struct|enum|trait|const|static|type|mod|union)[ \t]+(?:mut[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)",
    re.M)
WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rust_source import code_only  # noqa: E402


def members():
    with open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^members\s*=\s*\[([^\]]*)\]", text, re.M)
    return re.findall(r'"([^"]+)"', m.group(1))


def rs_files(top):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP and not d.startswith("."))
        for f in sorted(filenames):
            if f.endswith(".rs"):
                yield os.path.join(dirpath, f)


def test_start(text):
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod\s", text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else None


def doc_examples(text):
    """The code of the ``` blocks of doc comments in `text`."""
    out, inside = [], False
    for line in text.split("\n"):
        s = line.strip()
        if not (s.startswith("///") or s.startswith("//!")):
            inside = False
            continue
        body = s[3:].strip()
        if body.startswith("```"):
            inside = not inside
            continue
        if inside:
            out.append(body)
    return "\n".join(out)


def signature(code, m):
    """What another crate sees of the item matched by `m`: a fn up to its body, a struct's `pub`
    fields, the whole of an enum, trait, type alias or const."""
    kind, i = m.group(1), m.end()
    depth, j = 0, i
    while j < len(code):
        ch = code[j]
        if ch in "([<":
            depth += 1
        elif ch in ")]>" and code[j - 1] != "-":
            depth -= 1
        elif depth <= 0 and (ch == ";" or ch == "{"):
            break
        j += 1
    head = code[i:j]
    if kind == "fn" or j >= len(code) or code[j] == ";" or kind == "mod":
        return head
    depth, k = 0, j
    while k < len(code):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                break
        k += 1
    body = code[j:k + 1]
    if kind == "struct":
        body = "\n".join(ln for ln in body.split("\n") if ln.strip().startswith("pub "))
    return head + body


def main():
    summary = "--summary" in sys.argv
    crates = [c for c in members() if os.path.isfile(os.path.join(ROOT, c, "src", "lib.rs"))]
    allow = set()
    allow_path = os.path.join(ROOT, "scripts", "pub-allow.txt")
    if os.path.exists(allow_path):
        with open(allow_path, encoding="utf-8") as f:
            for ln in f:
                ln = ln.split("#", 1)[0].split()
                if len(ln) == 2:
                    allow.add((ln[0], ln[1]))
    # every .rs file of the workspace with its words, and whether it is in a lib's module tree
    files = {}
    for member in members():
        top = os.path.join(ROOT, member)
        for path in rs_files(top):
            # a nested member's files belong to it
            rel = os.path.relpath(path, ROOT)
            owner = max((m for m in members() if rel.startswith(m + "/")), key=len)
            if owner != member:
                continue
            with open(path, encoding="utf-8") as f:
                files[path] = (member, f.read())
    words_outside = {c: set() for c in crates}
    lib_files = {c: [] for c in crates}
    for path, (member, text) in files.items():
        src = os.path.join(ROOT, member, "src") + os.sep
        in_lib = (member in crates and path.startswith(src)
                  and not path.startswith(src + "bin" + os.sep) and path != src + "main.rs")
        if in_lib:
            lib_files[member].append(path)
            for c in crates:
                if c == member:
                    words_outside[c].update(WORD_RE.findall(doc_examples(text)))
            words = set(WORD_RE.findall(code_only(text)))
            for c in crates:
                if c != member:
                    words_outside[c].update(words)
        else:
            code = code_only(text)
            for c in crates:
                words_outside[c].update(WORD_RE.findall(code))
    problems, counts = [], {}
    for c in crates:
        with open(os.path.join(ROOT, c, "src", "lib.rs"), encoding="utf-8") as f:
            root_doc = "\n".join(ln for ln in f.read().split("\n") if ln.strip().startswith("//!"))
        documented = set(WORD_RE.findall(" ".join(re.findall(r"`([^`]*)`", root_doc))))
        # an item is reachable API when a used or documented pub item's signature names it (a
        # fn's parameters and result, a struct's pub fields, an enum's variants, a trait's items)
        sigs = {}
        for path in lib_files[c]:
            code = code_only(files[path][1])
            t = test_start(code)
            body = code if t is None else "\n".join(code.split("\n")[:t - 1])
            for m in ITEM_RE.finditer(body):
                sigs.setdefault(m.group(2), []).append(signature(body, m))
        used = {name for name in sigs if name in words_outside[c] or name in documented
                or (c, name) in allow}
        frontier = list(used)
        while frontier:
            for sig in sigs.get(frontier.pop(), []):
                for w in set(WORD_RE.findall(sig)):
                    if w in sigs and w not in used:
                        used.add(w)
                        frontier.append(w)
        n = 0
        for path in lib_files[c]:
            text = files[path][1]
            code = code_only(text)
            t = test_start(code)
            lines = code.split("\n")
            raw = text.split("\n")
            for m in ITEM_RE.finditer(code):
                no = code.count("\n", 0, m.start()) + 1
                if t is not None and no >= t:
                    continue
                kind, name = m.group(1), m.group(2)
                line = lines[no - 1]
                if 'extern "C"' in line or any("no_mangle" in raw[k] for k in range(max(0, no - 4), no - 1)):
                    continue
                if name in used:
                    continue
                if os.path.basename(path) == "tests.rs" or "/tests/" in path:
                    continue
                n += 1
                problems.append(f"{os.path.relpath(path, ROOT)}:{no}: pub {kind} {name} is used by no other "
                                "crate: make it pub(crate) (or name it in the crate's root doc)")
        counts[c] = n
    if summary:
        for c, n in counts.items():
            print(f"{c}: {n}")
    else:
        for p in problems:
            print(p)
    print(f"check-pub: {len(problems)} pub item(s) no other crate names")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
