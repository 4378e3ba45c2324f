#!/usr/bin/python3
"""check_layers.py — who calls whom, read from the built objects' symbols.

    scripts/check_layers.py BUILD_DIR [SRC_DIR]   (run by ctest: check_layers)

Owns: the layering rule of docs/architecture.md, checked on what the
compiler produced rather than on #include lines: for every object file of
the project's libraries and programs (tests, benchmarks and the fuzzer
aside), `nm` tells which global symbols it defines and which it uses; a file
that uses a symbol another file defines depends on it. From that graph:

  1. folders (client/, server/, store/, ...) must form no circle: a
     dependency between folders points one way;
  2. inside a folder, files must form no circle, unless every file of the
     circle is named on one `Module:` line in a comment of that folder's
     `*_impl.h` (the header that says "these files are the inside of one
     module", as server/auth_impl.h does for auth.c and auth_watch.c).

Prints the folders in layer order (each uses only folders printed before
it) and every circle found; exits 1 on a circle, 2 when it cannot read the
build, else 0.
Invariant: reads only; a symbol defined by several objects (the same
source built into two targets) belongs to one file, named by its path; an
object whose source is in neither tree (a file moved since that build
left its old object behind) is not read.
Never: looks at #include lines or at source text other than `Module:`
lines.
"""

import os
import re
import subprocess
import sys

SKIP_DIRS = {"tests", "bench", "CMakeFiles", "python", "packaging"}
GENERATED = re.compile(r"\.pb-c\.c$")
MODULE_LINE = re.compile(r"Module:\s*(.+)")


def objects(build):
    """Yields (source path relative to the tree, object path)."""
    for root, dirs, files in os.walk(build):
        rel = os.path.relpath(root, build)
        top = rel.split(os.sep)[0]
        if rel != "." and (top in SKIP_DIRS or top.startswith(".")):
            dirs[:] = []
            continue
        for f in files:
            if not f.endswith(".c.o"):
                continue
            # <folder>/CMakeFiles/<target>.dir/[sub/]file.c.o
            parts = rel.split(os.sep)
            if "CMakeFiles" not in parts:
                continue
            i = parts.index("CMakeFiles")
            folder = "/".join(parts[:i])
            sub = parts[i + 2:]
            src = "/".join([folder] + sub + [f[:-2]])
            yield src, os.path.join(root, f)


def symbols(obj):
    """(defined, used) global symbol sets of one object file."""
    out = subprocess.run(["nm", "-g", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] in ("U", "w", "v"):
            used.add(fields[1])
        elif len(fields) == 3 and fields[1] not in ("U", "w", "v"):
            defined.add(fields[2])
    return defined, used


def stale(build, src_dir, src):
    """Whether src (relative to the tree) is gone from both the source and
    the build tree: its object is a leftover of a file moved or deleted
    since that build (make does not delete it)."""
    return not (os.path.exists(os.path.join(src_dir, src)) or
                os.path.exists(os.path.join(build, src)))


def file_graph(build, src_dir):
    """{file: set of files it uses}, over the project's own symbols."""
    defs, uses = {}, {}
    for src, obj in objects(build):
        if stale(build, src_dir, src):
            continue
        d, u = symbols(obj)
        uses.setdefault(src, set()).update(u)
        for s in d:
            defs.setdefault(s, src)
    graph = {f: set() for f in uses}
    for f, used in uses.items():
        for s in used:
            g = defs.get(s)
            if g is not None and g != f:
                graph[f].add(g)
    return graph


def sccs(graph):
    """Strongly connected components (Tarjan), iteratively."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def folder_of(f):
    return f.split("/")[0]


def declared_modules(src, folder):
    """Sets of file paths that a *_impl.h of folder names on a Module: line."""
    mods = []
    d = os.path.join(src, folder)
    if not os.path.isdir(d):
        return mods
    for name in sorted(os.listdir(d)):
        if not name.endswith("_impl.h"):
            continue
        with open(os.path.join(d, name), encoding="utf-8") as fh:
            for line in fh:
                m = MODULE_LINE.search(line)
                if m:
                    files = re.findall(r"[\w.-]+\.c", m.group(1))
                    mods.append({folder + "/" + x for x in files})
    return mods


def layers(graph):
    """Folders in an order where each uses only earlier ones (no circle)."""
    done, order = set(), []
    while len(done) < len(graph):
        ready = sorted(f for f in graph
                       if f not in done and graph[f] <= done)
        if not ready:
            return order, sorted(set(graph) - done)
        order.append(ready)
        done.update(ready)
    return order, []


def main(argv):
    if len(argv) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    build = argv[1]
    src = argv[2] if len(argv) > 2 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    graph = file_graph(build, src)
    if not graph:
        print(f"check_layers: no object files under {build}", file=sys.stderr)
        return 2
    bad = 0
    folders = {}
    for f, used in graph.items():
        folders.setdefault(folder_of(f), set()).update(
            folder_of(g) for g in used if folder_of(g) != folder_of(f))
    for comp in sccs(folders):
        if len(comp) > 1:
            bad += 1
            print("circle between folders: " + " -> ".join(comp + comp[:1]))
            for f in sorted(graph):
                for g in sorted(graph[f]):
                    if folder_of(f) in comp and folder_of(g) in comp and \
                            folder_of(f) != folder_of(g):
                        print(f"    {f} uses {g}")
    for comp in sccs(graph):
        if len(comp) < 2 or GENERATED.search(comp[0]):
            continue
        mods = declared_modules(src, folder_of(comp[0]))
        if any(set(comp) <= m for m in mods):
            continue
        bad += 1
        print("circle between files not declared one module (a Module: line "
              f"in {folder_of(comp[0])}/*_impl.h): " + ", ".join(comp))
        for f in comp:
            for g in sorted(graph[f] & set(comp)):
                print(f"    {f} uses {g}")
    order, stuck = layers(folders)
    for i, layer in enumerate(order):
        print(f"layer {i}: " + " ".join(layer))
    if stuck:
        print("not layered: " + " ".join(stuck))
    print(f"{len(graph)} files in {len(folders)} folders; "
          f"{bad} circle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
