#!/usr/bin/env python3
"""check_shape.py — the shape rules of the tree that a compiler does not
check (docs/architecture.md, "Shape"); run by ctest as check_shape.

    scripts/check_shape.py [SRCDIR]

1. No function in client/, server/, repl/ or http/ longer than FUNC_MAX lines
   (from the line of its name to its closing brace), except those listed
   in scripts/shape_allow.txt with their length at the time: a listed one
   may shrink, never grow. A listed function now within the limit, or
   gone, is reported so its line can be deleted.
2. No status reason spelled outside its table: a string literal in C or
   Python whose text is the name of a row of proto/reasons.tsv is refused
   anywhere in the sources (SCAN), which use REASON_<NAME> (proto/
   reasons.h), ONCE_REASON_<NAME> (once/reasons.h) or once.reasons.<NAME>.
   tests/ is left out on purpose: a test pins the spelling on the wire,
   independently of the table it checks. Comments are not looked at.
3. A code set together with a reason (call_fail, grants_fail, the
   grants' REJECT macros, status_set and oncectl's *_fail: a code name
   right before a REASON_ name) is one of that reason's codes in the
   table, so its codes column says what the code does.

Prints every offence and exits 1 if there is any, else prints a summary
and exits 0.

Owns: the two rules and the reading of C and Python it needs (a small
lexer: comments, string and character literals, preprocessor lines).
Invariant: it reads the source tree only; generated files (in the build
tree) are never seen.
Never: writes anything; needs nothing beyond the Python standard library.
"""
import ast
import io
import os
import re
import sys
import tokenize

FUNC_MAX = 120
FUNC_DIRS = ("client", "server", "repl", "http")
SCAN = ("base", "bench", "cli", "client", "examples", "gc", "grants", "http",
        "kv", "lease", "proto", "python", "repl", "server", "store")
ALLOW = os.path.join("scripts", "shape_allow.txt")
# What scripts/reasons.py writes at the top of every file it generates.
GENERATED = "generated from proto/reasons.tsv by scripts/reasons.py"


def c_lex(text):
    """Returns (code, strings): code is text with comments blanked, string
    and character literals emptied and preprocessor lines blanked (newlines
    kept, so line numbers hold); strings is [(line, literal text)]."""
    out, strings = [], []
    i, n, line = 0, len(text), 1
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":
            # A preprocessor line, with its continuations: blanked, but
            # its string literals (#define X "..") are still literals.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    line += 1
                    i += 2
                    continue
                if text[i] == '"':
                    j, s = c_string(text, i)
                    strings.append((line, s))
                    i = j
                    continue
                if text[i:i + 2] == "/*":
                    j = text.find("*/", i + 2)
                    j = n if j < 0 else j + 2
                    out.append("\n" * text.count("\n", i, j))
                    line += text.count("\n", i, j)
                    i = j
                    continue
                i += 1
            continue
        at_line_start = False
        if c == "\n":
            out.append(c)
            line += 1
            at_line_start = True
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            line += text.count("\n", i, j)
            i = j
        elif c == '"':
            j, s = c_string(text, i)
            strings.append((line, s))
            out.append('""')
            i = j
        elif c == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), strings


def c_string(text, i):
    """The literal starting at text[i] == '"': (index after it, its text)."""
    j = i + 1
    while j < len(text) and text[j] != '"' and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    return j + 1, text[i + 1:j]


def c_functions(code):
    """[(name, first line, last line)] of the function definitions in
    lexed code: a '{' at depth 0 right after a ')' opens a body; its name
    is the identifier before the matching '('."""
    funcs, depth, i, line = [], 0, 0, 1
    start = None
    while i < len(code):
        c = code[i]
        if c == "\n":
            line += 1
        elif c == "{":
            if depth == 0:
                start = function_head(code, i)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and start is not None:
                funcs.append((start[0], start[1], line))
                start = None
        i += 1
    return funcs


def function_head(code, brace):
    """(name, line) if the '{' at brace opens a function body, else None."""
    j = brace - 1
    while j >= 0 and code[j].isspace():
        j -= 1
    if j < 0 or code[j] != ")":
        return None
    depth = 0
    while j >= 0:
        if code[j] == ")":
            depth += 1
        elif code[j] == "(":
            depth -= 1
            if depth == 0:
                break
        j -= 1
    m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", code[:j])
    if m is None or m.group(1) in ("if", "while", "for", "switch"):
        return None
    return m.group(1), code.count("\n", 0, m.start(1)) + 1


def py_strings(path, text):
    """[(line, value)] of the str and bytes literals of a Python file."""
    found = []
    toks = tokenize.generate_tokens(io.StringIO(text).readline)
    for tok in toks:
        if tok.type != tokenize.STRING:
            continue
        try:
            v = ast.literal_eval(tok.string)
        except (ValueError, SyntaxError):
            continue  # an f-string: not a plain literal
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        found.append((tok.start[0], v))
    return found


# A code right before a reason: call_fail(c, ONCE__V1__CODE__X, REASON_Y,
# grants_fail(o, CODE(X), REASON_Y, status_set(st, ONCE_X, ONCE_REASON_Y
# (also behind "cond ?"), START_REJECT(c, X, REASON_Y.
CODE_REASON = re.compile(
    r"(?:ONCE__V1__CODE__|\bCODE\(\s*|\bONCE_|_REJECT\(\s*(?:\w+\s*,\s*)?)"
    r"([A-Z_]+)\)?\s*,\s*(?:\w+\s*\?\s*)?(?:ONCE_)?REASON_([A-Z0-9_]+)")


def reason_rows(src):
    sys.path.insert(0, os.path.join(src, "scripts"))
    import reasons  # scripts/reasons.py: the table's one reader
    return {r.name: r for r in reasons.load(os.path.join(src, "proto",
                                                         "reasons.tsv"))}


def sources(src, dirs, exts):
    for d in dirs:
        for root, subdirs, files in os.walk(os.path.join(src, d)):
            subdirs[:] = sorted(s for s in subdirs if s != "__pycache__")
            for f in sorted(files):
                if f.endswith(exts):
                    yield os.path.relpath(os.path.join(root, f), src)


def load_allow(src):
    allow = {}
    with open(os.path.join(src, ALLOW), encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if line:
                path, name, length = line.split()
                allow[(path, name)] = int(length)
    return allow


def check_functions(src, bad):
    allow = load_allow(src)
    seen, long_ones = set(), 0
    for path in sources(src, FUNC_DIRS, (".c", ".h")):
        with open(os.path.join(src, path), encoding="utf-8") as f:
            code, _ = c_lex(f.read())
        for name, first, last in c_functions(code):
            length = last - first + 1
            if length <= FUNC_MAX:
                continue
            long_ones += 1
            seen.add((path, name))
            was = allow.get((path, name))
            if was is None:
                bad.append("%s:%d: %s is %d lines (at most %d; split it)" %
                           (path, first, name, length, FUNC_MAX))
            elif length > was:
                bad.append("%s:%d: %s grew to %d lines (allowed %d while "
                           "it waits to be split; at most %d)" %
                           (path, first, name, length, was, FUNC_MAX))
            else:
                print("allowed for now: %s:%d: %s, %d lines (listed %d)" %
                      (path, first, name, length, was))
    for key in sorted(set(allow) - seen):
        print("%s: %s %s is within %d lines now (or gone): delete its line" %
              (ALLOW, key[0], key[1], FUNC_MAX))
    return long_ones


def check_reasons(src, bad):
    rows = reason_rows(src)
    names = set(rows)
    files = pairs = 0
    for path in sources(src, SCAN, (".c", ".h", ".h.in", ".py")):
        files += 1
        with open(os.path.join(src, path), encoding="utf-8") as f:
            text = f.read()
        if GENERATED in text[:400]:
            continue  # an in-source build's copy of a generated file
        if path.endswith(".py"):
            found = py_strings(path, text)
        else:
            code, found = c_lex(text)
            for m in CODE_REASON.finditer(code):
                pairs += 1
                c, r = m.groups()
                line = code.count("\n", 0, m.start()) + 1
                if r not in rows:
                    bad.append("%s:%d: REASON_%s is not in the table" %
                               (path, line, r))
                elif c not in rows[r].codes:
                    bad.append("%s:%d: %s given with %s, whose codes in "
                               "proto/reasons.tsv are %s" %
                               (path, line, c, r,
                                ", ".join(rows[r].codes) or "none"))
        for line, s in found:
            if s in names:
                bad.append('%s:%d: "%s" spelled out: use the table\'s name '
                           "(REASON_%s, ONCE_REASON_%s or reasons.%s)" %
                           (path, line, s, s, s, s))
    return len(names), files, pairs


def main(argv):
    src = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    bad = []
    long_ones = check_functions(src, bad)
    nreasons, nfiles, npairs = check_reasons(src, bad)
    for b in bad:
        print(b)
    if bad:
        print("check_shape: %d offence(s)" % len(bad))
        return 1
    print("check_shape: no new function over %d lines in %s (%d allowed "
          "for now, %s); none of the %d reasons spelled out in %d files; "
          "%d codes given with a reason, each one of its codes" %
          (FUNC_MAX, ", ".join(FUNC_DIRS), long_ones, ALLOW, nreasons,
           nfiles, npairs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
