"""test_py_layout.py — the ctypes structs of once._lib against the C headers.

Owns: the check that every ctypes Structure the package declares has the
size, field offsets and field sizes of the C struct of the same name, as the
compiler lays it out from the headers of this tree (client/include/once/
and the build's generated version.h).
Invariant: the field list is read from the Python classes themselves, so a
struct or field added on one side only fails here (a field C does not have
fails to compile; a size or offset that differs is named).
Never: keeps a second copy of any field list; runs onced.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from once import _lib

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ONCE_BUILD_DIR", ROOT / "build"))
INCLUDES = [ROOT / "client" / "include", BUILD / "client" / "include"]


def structs():
    """Every ctypes Structure declared in once._lib, by its C name."""
    return {name: cls for name, cls in vars(_lib).items()
            if isinstance(cls, type) and issubclass(cls, ctypes.Structure)
            and cls is not ctypes.Structure}


def c_program(classes) -> str:
    """A C program printing, for each struct, its size and each field's
    offset and size: "NAME.FIELD OFFSET SIZE" and "NAME SIZE"."""
    headers = sorted((ROOT / "client" / "include" / "once").glob("*.h"))
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += [f"#include <once/{h.name}>" for h in headers]
    lines.append("#define F(s, f) printf(#s \".\" #f \" %zu %zu\\n\", "
                 "offsetof(s, f), sizeof(((s *)0)->f))")
    lines.append("int main(void) {")
    for name, cls in sorted(classes.items()):
        lines.append(f'    printf("{name} %zu\\n", sizeof({name}));')
        lines += [f"    F({name}, {f[0]});" for f in cls._fields_]
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def c_layout(classes) -> dict:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler (cc) to read the headers' layout with")
    with tempfile.TemporaryDirectory(prefix="once-layout-") as d:
        src, exe = Path(d) / "layout.c", Path(d) / "layout"
        src.write_text(c_program(classes))
        args = [cc, "-std=c11", "-o", str(exe), str(src)]
        args += [f"-I{p}" for p in INCLUDES]
        r = subprocess.run(args, capture_output=True, text=True)
        assert r.returncode == 0, (
            "the C headers do not have a struct or field once._lib "
            "declares:\n" + r.stderr[-3000:])
        out = subprocess.run([str(exe)], capture_output=True, text=True,
                             check=True).stdout
    layout = {}
    for line in out.splitlines():
        parts = line.split()
        layout[parts[0]] = tuple(int(x) for x in parts[1:])
    return layout


def test_structs_match_c():
    classes = structs()
    assert len(classes) >= 8, f"only {sorted(classes)} found in once._lib"
    layout = c_layout(classes)
    wrong = []
    for name, cls in sorted(classes.items()):
        if layout[name] != (ctypes.sizeof(cls),):
            wrong.append(f"sizeof({name}): C {layout[name][0]}, "
                         f"ctypes {ctypes.sizeof(cls)}")
        for field, ftype in cls._fields_:
            desc = getattr(cls, field)
            c_off, c_size = layout[f"{name}.{field}"]
            if (desc.offset, desc.size) != (c_off, c_size):
                wrong.append(f"{name}.{field}: C offset {c_off} size "
                             f"{c_size}, ctypes offset {desc.offset} size "
                             f"{desc.size}")
    assert not wrong, "once._lib differs from the C headers:\n  " + \
        "\n  ".join(wrong)
