#!/usr/bin/env python3
"""The house's structural rules, checked (ARCHITECTURE.md, "Where to add"):

- no source file under a crate's `src/` over 1000 lines (inline test modules count: a large one
  moves to `<module>/tests.rs`, which is exempt as a test file);
- no function over 120 lines (source files and integration tests alike);
- no `#[allow(clippy::too_many_arguments)]` (a parameter list that long becomes a named struct);
- no import circle between the files of a crate, and no upward import: neither a file importing
  from the file of a module that contains it (a module's `tests.rs` may), nor a module tree
  importing from a sibling tree that imports it back (the trees under one parent form layers:
  `predict/app/measured.rs` → `crate::app`, while `app` → `crate::run` → `crate::predict`, is
  an import up out of the predictor's layer);
- one meaning per file name: no two source files of the workspace share a base name, outside
  the names scripts/structure-names.txt allows (it says which and why);
- no lab notebook in non-test sources: no dates, session names, issue numbers or named machines
  in the comments and strings of a crate's `src/` (outside its tests) or of `scripts/`
  (scripts/structure_notebook.py says what is matched and why).

Paths in scripts/structure-pending.txt (temporary: files another branch is rewriting) are left
out of the lab-notebook rule; `--pending` prints what it finds in them.

Prints one line per violation and exits 1 when there is any; `--summary` prints counts only.
Run from anywhere: `python3 scripts/check-structure.py`.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rust_source  # noqa: E402
import structure_notebook  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE = 1000
MAX_FN = 120
SKIP_DIRS = {"target", ".git", "node_modules", "shared"}


def crate_roots():
    """Every directory holding a Cargo.toml with a src/ folder (workspace members)."""
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            yield dirpath


def rust_files(top):
    """Rust files of the crate at `top` (a nested crate, such as emulator/preload, is its own)."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [
            d for d in dirnames
            if d not in SKIP_DIRS and not d.startswith(".")
            and not os.path.exists(os.path.join(dirpath, d, "Cargo.toml"))
        ]
        for f in filenames:
            if f.endswith(".rs"):
                yield os.path.join(dirpath, f)


FN_RE = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def long_functions(path, code):
    """(name, first line, length) of every fn body longer than MAX_FN lines."""
    found = []
    for m in FN_RE.finditer(code):
        # the body starts at the first `{` after the signature, unless a `;` comes first
        j = m.end()
        depth_paren = 0
        while j < len(code):
            ch = code[j]
            if ch in "([<":
                depth_paren += 1
            elif ch in ")]>":
                depth_paren -= 1
            elif ch == ";" and depth_paren <= 0:
                j = -1
                break
            elif ch == "{" and depth_paren <= 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, k) + 1
        if last - first + 1 > MAX_FN:
            found.append((m.group(1), first, last - first + 1))
    return found


def module_path(src, path):
    """The module path of a file under src/ (lib.rs/main.rs: the crate root, ())."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


USE_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
USE_BLOCK_RE = re.compile(r"\buse\s+(crate|super|self)::([^;]*);", re.S)


def references(mod, code):
    """Module paths (absolute, within the crate) this file's code names."""
    refs = []

    def resolve(head, rest):
        if head == "crate":
            base = ()
        elif head == "self":
            base = mod
        else:  # super
            base = mod[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        return base + tuple(rest)

    for m in USE_BLOCK_RE.finditer(code):
        head, body = m.group(1), m.group(2)
        # expand one level of braces: a::{b, c::d} -> a::b, a::c::d
        body = re.sub(r"\s+", "", body)
        for path in expand(body):
            refs.append(resolve(head, [p for p in path.split("::") if p]))
    for m in USE_RE.finditer(code):
        rest = [p for p in m.group(2).split("::") if p and p != "{"]
        refs.append(resolve(m.group(1), rest))
    return refs


def expand(body):
    if "{" not in body:
        return [body]
    i = body.index("{")
    prefix = body[:i]
    depth, j = 0, i
    while j < len(body):
        if body[j] == "{":
            depth += 1
        elif body[j] == "}":
            depth -= 1
            if depth == 0:
                break
        j += 1
    inner = body[i + 1:j]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out.extend(expand(prefix + p))
    return out


def test_region_start(code):
    """Line index of a top-level `#[cfg(test)]` followed by `mod` (inline tests)."""
    for m in re.finditer(r"^#\[cfg\(test\)\]\s*\n\s*mod\s", code, re.M):
        return m.start()
    return len(code)


def crate_graph(src):
    files = {}
    for path in rust_files(src):
        files[module_path(src, path)] = path
    edges = {}
    for mod, path in files.items():
        with open(path, encoding="utf-8") as f:
            code = rust_source.code_only(f.read())
        code = code[:test_region_start(code)]
        targets = set()
        for ref in references(mod, code):
            # the deepest file-module on the referenced path
            best = None
            for k in range(len(ref), -1, -1):
                if ref[:k] in files:
                    best = ref[:k]
                    break
            if best is None or best == mod:
                continue
            targets.add(best)
        edges[mod] = targets
    return files, edges


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def tree_circles(files, edges):
    """Circles between sibling module trees: for every parent module, its children's subtrees
    collapsed to one node each (tests modules left out, as for upward imports)."""
    parents = {m[:k] for m in files for k in range(len(m))}
    out = []
    for parent in sorted(parents):
        depth = len(parent)
        graph = {}
        for mod, targets in edges.items():
            if len(mod) <= depth or mod[:depth] != parent or "tests" in mod[depth:]:
                continue
            a = mod[:depth + 1]
            for t in targets:
                if len(t) > depth and t[:depth] == parent and t[:depth + 1] != a:
                    graph.setdefault(a, set()).add(t[:depth + 1])
        for comp in sccs(sorted(graph), graph):
            out.append((parent, sorted(comp)))
    return out


def pending_paths():
    """The temporary exclusions of scripts/structure-pending.txt (relative paths, folders end /)."""
    path = os.path.join(ROOT, "scripts", "structure-pending.txt")
    with open(path, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def is_pending(rel, pending):
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in pending)


def script_files():
    """The scripts of the repository (their comments and strings are sources too)."""
    top = os.path.join(ROOT, "scripts")
    own = {"structure_notebook.py", "structure-pending.txt"}
    for dirpath, dirnames, filenames in os.walk(top):
        for f in sorted(filenames):
            if f not in own and (f.endswith((".sh", ".py")) or "." not in f):
                yield os.path.join(dirpath, f)


def script_notebook(text):
    """(line, kind, match) of the lab notebook in a script's comments (`#` to the line's end)."""
    found = []
    for no, line in enumerate(text.split("\n"), 1):
        i = line.find("#")
        if i < 0 or line.startswith("#!"):
            continue
        for kind, pat in structure_notebook.PATTERNS:
            m = pat.search(line[i + 1:])
            if m:
                found.append((no, kind, m.group(0)))
    return found


STRUCTURAL_NAMES = {"lib.rs", "main.rs", "mod.rs", "build.rs", "tests.rs", "error.rs"}


def allowed_names():
    """The base names scripts/structure-names.txt lets several files share."""
    path = os.path.join(ROOT, "scripts", "structure-names.txt")
    with open(path, encoding="utf-8") as f:
        return {ln.split("#", 1)[0].strip() for ln in f if ln.split("#", 1)[0].strip()}


def shared_names(paths):
    """(base name, files) for each name more than one source file bears, the allowed aside."""
    allowed = allowed_names()
    groups = {}
    for path in paths:
        rel = os.path.relpath(path, ROOT)
        parts = rel.split(os.sep)
        base = parts[-1]
        if (base in STRUCTURAL_NAMES or base in allowed or "tests" in parts
                or "flags" in parts or "commands" in parts or "src" not in parts):
            continue
        groups.setdefault(base, []).append(rel)
    return sorted((b, sorted(fs)) for b, fs in groups.items() if len(fs) > 1)


def name(mod):
    return "::".join(mod) if mod else "(crate root)"


def main():
    summary = "--summary" in sys.argv
    show_pending = "--pending" in sys.argv
    pending = pending_paths()
    problems = {"file": [], "fn": [], "allow": [], "circle": [], "upward": [], "notebook": [],
                "name": []}
    all_sources = []
    held = []

    def notebook(rel, hits):
        for no, kind, match in hits:
            line = f"{rel}:{no}: {kind} '{match}' (say what and where it is measured, not when)"
            (held if is_pending(rel, pending) else problems["notebook"]).append(line)
    for crate in sorted(crate_roots()):
        src = os.path.join(crate, "src")
        for path in rust_files(crate):
            all_sources.append(path)
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.count("\n")
            in_src = path.startswith(src + os.sep)
            is_test_file = os.path.basename(path) == "tests.rs" or os.sep + "tests" + os.sep in path
            if in_src and not is_test_file and lines > MAX_FILE:
                problems["file"].append(f"{rel}: {lines} lines (limit {MAX_FILE})")
            if "clippy::too_many_arguments" in text:
                problems["allow"].append(f"{rel}: #[allow(clippy::too_many_arguments)]")
            code = rust_source.code_only(text)
            for fn, first, length in long_functions(path, code):
                problems["fn"].append(f"{rel}:{first}: fn {fn} is {length} lines (limit {MAX_FN})")
            if in_src and not is_test_file:
                last = code[:test_region_start(code)].count("\n") + 1
                notebook(rel, structure_notebook.notebook_lines(text, last))
        files, edges = crate_graph(src)
        crate_name = os.path.relpath(crate, ROOT)
        for comp in sccs(sorted(files), edges):
            problems["circle"].append(
                f"{crate_name}: import circle between " + ", ".join(sorted(name(m) for m in comp)))
        for parent, comp in tree_circles(files, edges):
            problems["upward"].append(
                f"{crate_name}: the module trees " + ", ".join(name(m) for m in comp)
                + f" (under {name(parent)}) import each other: one must sit below the others")
        for mod, targets in edges.items():
            if mod and mod[-1] == "tests":
                continue  # a module's tests (`<module>/tests.rs`) use their parent's items
            for t in targets:
                if len(t) < len(mod) and mod[:len(t)] == t and t != ():
                    problems["upward"].append(
                        f"{crate_name}: {name(mod)} imports from its parent module {name(t)}")
    for base, paths in shared_names(all_sources):
        problems["name"].append(
            f"{base} names {len(paths)} files: " + ", ".join(paths)
            + " (rename to say each one's job, or allow it in scripts/structure-names.txt)")
    for path in script_files():
        with open(path, encoding="utf-8") as f:
            notebook(os.path.relpath(path, ROOT), script_notebook(f.read()))
    if show_pending:
        for line in held:
            print(f"pending notebook: {line}")
        print(f"check-structure: {len(held)} lab-notebook line(s) in pending paths")
        return 0
    total = sum(len(v) for v in problems.values())
    for kind, items in problems.items():
        if summary:
            print(f"{kind}: {len(items)}")
        else:
            for line in items:
                print(f"{kind}: {line}")
    print(f"check-structure: {total} problem(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
