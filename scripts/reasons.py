#!/usr/bin/env python3
"""reasons.py — everything derived from proto/reasons.tsv, the one table of
status reasons (docs/architecture.md, "Reasons").

    reasons.py TSV c OUT          proto/reasons.h: REASON_<NAME>, every row
    reasons.py TSV public OUT     once/reasons.h: ONCE_REASON_<NAME>, the
                                  rows a libonce caller can see
    reasons.py TSV python OUT     once/reasons.py for the Python package
    reasons.py TSV spec SPEC      check docs/spec.md's reason table
                                  (ctest check_reasons); --write rewrites it

Owns: reading the table (and refusing a malformed one: an unknown code, a
repeated name, a "from" it does not know, text that would break a C
comment or a markdown table) and writing its derived forms.
Invariant: the output depends on the table only, byte for byte.
Never: reads or writes anything besides its arguments; needs nothing
beyond the Python standard library (it runs at build time).
"""
import os
import re
import sys
import textwrap

FROM = ("onced", "libonce", "oncectl", "python", "rows")
# Who sees which rows: libonce's callers get what onced and libonce give;
# Python's what libonce's do and its own; oncectl's own stay in proto/.
PUBLIC = {"onced", "libonce", "rows"}
PYTHON = PUBLIC | {"python"}
SPEC_BEGIN = "<!-- reasons: begin -->"
SPEC_END = "<!-- reasons: end -->"


class Reason:
    def __init__(self, line_no, fields):
        self.line = line_no
        self.name, codes, whence, self.meaning, self.next = fields
        self.codes = [c.strip() for c in codes.split(",") if c.strip()]
        self.whence = [w.strip() for w in whence.split(",") if w.strip()]


def fail(msg):
    sys.stderr.write("reasons.py: %s\n" % msg)
    sys.exit(1)


def proto_codes(tsv):
    """The names of enum once.v1.Code, from once.proto beside the table."""
    path = os.path.join(os.path.dirname(tsv), "once.proto")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"enum\s+Code\s*\{(.*?)\}", text, re.S)
    if m is None:
        fail("%s: no enum Code" % path)
    return set(re.findall(r"^\s*([A-Z_]+)\s*=", m.group(1), re.M))


def load(tsv):
    codes = proto_codes(tsv)
    rows, seen = [], set()
    with open(tsv, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line == "" or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 5:
                fail("%s:%d: %d columns, want 5" % (tsv, no, len(fields)))
            r = Reason(no, fields)
            where = "%s:%d: %s" % (tsv, no, r.name)
            if not re.fullmatch(r"[A-Z][A-Z0-9_]+", r.name):
                fail("%s: not an upper-case word" % where)
            if r.name in seen:
                fail("%s: listed twice" % where)
            seen.add(r.name)
            for c in r.codes:
                if c not in codes or c == "OK":
                    fail("%s: %s is not a failing once.v1.Code" % (where, c))
            if not r.whence or any(w not in FROM for w in r.whence):
                fail("%s: from must be some of %s" % (where, ",".join(FROM)))
            if not r.codes and r.whence != ["rows"]:
                fail("%s: only a rows-only reason has no code" % where)
            if "|" in line or "*/" in line or not r.meaning or not r.next:
                fail("%s: empty text, or a '|' or '*/'" % where)
            rows.append(r)
    return rows


def comment(r):
    """The row as a C comment: meaning, codes, who gives it, what next."""
    codes = ", ".join(r.codes) if r.codes else "no code: a grants row's"
    text = "%s (%s; from %s). Next: %s." % (r.meaning, codes,
                                            ", ".join(r.whence), r.next)
    lines = textwrap.wrap(text, 73)
    return "/* " + "\n * ".join(lines) + " */\n"


def write(path, text):
    """Writes text to path (through a temporary file: never half a file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def c_header(rows, guard, prefix, what, out):
    parts = [
        "/*\n * %s — generated from proto/reasons.tsv by scripts/reasons.py;"
        "\n * do not edit: add or change a reason in the table.\n *\n"
        " * %s\n */\n#ifndef %s\n#define %s\n\n" %
        ("/".join(out.split(os.sep)[-2:]), what, guard, guard)]
    for r in rows:
        parts.append(comment(r))
        parts.append("#define %s%s \"%s\"\n" % (prefix, r.name, r.name))
    parts.append("\n#endif /* %s */\n" % guard)
    write(out, "".join(parts))


def py_module(rows, out):
    parts = [
        '"""once.reasons — generated from proto/reasons.tsv by '
        'scripts/reasons.py;\ndo not edit: add or change a reason in the '
        'table.\n\nEvery reason a status of the Python client can carry, as '
        'a constant\n(``reasons.STALE_RPC == "STALE_RPC"``), and TABLE: '
        'name -> (codes,\nmeaning, what to do next).\n"""\n'
        "from typing import Dict, Tuple\n\n"]
    for r in rows:
        parts.append("%s = %r\n" % (r.name, r.name))
    parts.append("\nTABLE: Dict[str, Tuple[Tuple[str, ...], str, str]] = {\n")
    for r in rows:
        parts.append("    %s: (%r, %r,\n        %r),\n" %
                     (r.name, tuple(r.codes), r.meaning, r.next))
    parts.append("}\n")
    write(out, "".join(parts))


def spec_row(r):
    codes = ", ".join("`%s`" % c for c in r.codes) if r.codes else "—"
    return "| `%s` | %s | %s | %s | %s |" % (
        r.name, codes, ", ".join(r.whence), r.meaning, r.next)


def spec(rows, path, rewrite):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    b, e = text.find(SPEC_BEGIN), text.find(SPEC_END)
    if b < 0 or e < b:
        fail("%s: no %s ... %s markers" % (path, SPEC_BEGIN, SPEC_END))
    want = ["| reason | code | from | meaning | what to do next |",
            "|---|---|---|---|---|"] + [spec_row(r) for r in rows]
    have = [l for l in text[b + len(SPEC_BEGIN):e].split("\n") if l.strip()]
    if rewrite:
        write(path, text[:b + len(SPEC_BEGIN)] + "\n" + "\n".join(want) +
              "\n" + text[e:])
        return
    if have == want:
        print("check_reasons: %s's table matches the %d reasons" %
              (path, len(rows)))
        return
    for line in sorted(set(have) - set(want)):
        print("only in %s: %s" % (path, line))
    for line in sorted(set(want) - set(have)):
        print("only in the table: %s" % line)
    if set(have) == set(want):
        print("same rows, another order")
    print("check_reasons: %s's reason table differs from proto/reasons.tsv;"
          " scripts/reasons.py proto/reasons.tsv spec %s --write"
          " rewrites it" % (path, path))
    sys.exit(1)


def main(argv):
    if len(argv) < 4:
        fail(__doc__.split("\n\n")[1])
    rows = load(argv[1])
    cmd, out = argv[2], argv[3]
    if cmd == "c":
        c_header(rows, "PROTO_REASONS_H", "REASON_",
                 "Every status reason of once (onced, libonce, oncectl) as "
                 "REASON_<NAME>.\n * Code compares and sets reasons through"
                 " these names only.", out)
    elif cmd == "public":
        c_header([r for r in rows if PUBLIC & set(r.whence)],
                 "ONCE_REASONS_H", "ONCE_REASON_",
                 "The reasons a libonce caller can see: the machine-readable"
                 " half of a\n * status, named so no caller has to spell the"
                 " strings (once_status_is\n * compares them). A server may"
                 " send reasons newer than this list.", out)
    elif cmd == "python":
        py_module([r for r in rows if PYTHON & set(r.whence)], out)
    elif cmd == "spec":
        spec(rows, out, "--write" in argv[4:])
    else:
        fail("unknown command %s" % cmd)


if __name__ == "__main__":
    main(sys.argv)
