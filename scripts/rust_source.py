"""One reading of Rust source for the house's checks (check-structure.py, its lab-notebook rule
in structure_notebook.py, check-pub.py): the text split into code, and comments and string
literals ("prose"), each view keeping the other's newlines so that line numbers hold. Char
literals belong to neither (they hold no brace or word the checks count)."""
import re


def segments(text):
    """(kind, start, end) runs of `text`, kind "code", "prose" or "drop" (a char literal)."""
    segs = []
    i, n, code_from = 0, len(text), 0

    def cut(kind, a, b):
        if code_from < a:
            segs.append(("code", code_from, a))
        segs.append((kind, a, b))
        return b

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = code_from = cut("prose", i, n if j < 0 else j)
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
            i = code_from = cut("prose", i, j)
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 10])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            i = code_from = cut("prose", i, n if j < 0 else j + len(end))
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = code_from = cut("prose", i, min(j + 1, n))
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                i = code_from = cut("drop", i, i + len(m.group(0)))
                continue
        i += 1
    if code_from < n:
        segs.append(("code", code_from, n))
    return segs


def view(text, keep):
    """`text` with the runs of kind `keep` as they are and every other run blanked to its
    newlines."""
    return "".join(text[a:b] if k == keep else "\n" * text.count("\n", a, b)
                   for k, a, b in segments(text))


def code_only(text):
    """`text` with comments, strings and chars blanked (newlines kept)."""
    return view(text, "code")


def prose_only(text):
    """The comments and string literals of `text`, code blanked out (newlines kept)."""
    return view(text, "prose")
