#!/usr/bin/env bash
#
# test_frontdoor.sh SOURCE_DIR BUILD_DIR — runs the README's quick start as
# written, against an onced of its own; then the runnable examples of the
# docs (DOCS below), each file against a fresh onced.
#
# Owns: the check that the README's quick start works verbatim: the fenced
# block after each `<!-- quickstart: NAME -->` marker is extracted from
# README.md and run by bash, unchanged, in a directory whose `build` and
# `examples` are this build and the source's examples/ (so `build/...` in
# the README means this build). The oncectl block's output must equal the
# README's "oncectl output" block byte for byte; the C block installs the
# build into build/prefix and builds examples/hello.c there with
# pkg-config and with CMake find_package(once), and both programs must
# print a replay. In each file of DOCS, every fenced block after a
# `<!-- run: NAME -->` marker runs the same way, in order, and its output
# must equal the block after `<!-- run: NAME output -->` when there is one
# (times compared as <time>); a block that needs build/python is skipped
# when the build has no Python package.
# Invariant: onced runs on a temp data folder and ipc path (never ./data or
# /tmp/once.ipc), like `make run` otherwise (--dev); every wait is bounded.
# Never: edits the README or the examples; leaves onced running.
set -euo pipefail

src=$(cd "$1" && pwd)
bld=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/once-frontdoor-XXXXXX)
onced_pid=

cleanup() {
    if [ -n "$onced_pid" ] && kill -0 "$onced_pid" 2>/dev/null; then
        kill -TERM "$onced_pid"
        wait "$onced_pid" || true
    fi
    if [ -z "${ONCE_TEST_KEEP:-}" ]; then
        rm -rf "$tmp"
    else
        echo "kept $tmp" >&2
    fi
}
trap cleanup EXIT

fail() {
    echo "test_frontdoor: FAILED: $*" >&2
    if [ -f "$tmp/onced.log" ]; then
        echo "---- onced.log" >&2
        cat "$tmp/onced.log" >&2
    fi
    exit 1
}

# The first fenced block after the marker line `<!-- $2 -->` of file $1.
marked_block() {
    awk -v m="<!-- $2 -->" '
        $0 == m { found = 1; next }
        found && /^```/ { if (inside) exit; inside = 1; next }
        inside { print }
    ' "$1"
}

# The first fenced block after `<!-- quickstart: $1 -->` of the README.
block() {
    marked_block "$src/README.md" "quickstart: $1"
}

# The docs whose `<!-- run: NAME -->` examples run as written.
DOCS="docs/kv.md docs/python.md docs/outbox.md"

for name in oncectl "oncectl output" c; do
    if [ -z "$(block "$name")" ]; then
        fail "README.md has no block after <!-- quickstart: $name -->"
    fi
done

# What an earlier run built (its CMake cache names another temp path).
rm -rf "$bld/prefix" "$bld/hello" "$bld/hello-cmake"

# onced as `make run` starts it, on paths of our own: data folder $1 and
# socket $1.ipc under $tmp.
start_onced() {
    url="ipc://$tmp/$1.ipc"
    "$bld/server/onced" --data "$tmp/$1" --dev --listen "$url" \
        >>"$tmp/onced.log" 2>&1 &
    onced_pid=$!
    export ONCE_SERVER="$url" ONCE_KEY_FILE="$tmp/$1/dev.key"
    for _ in $(seq 1 200); do
        if [ -f "$ONCE_KEY_FILE" ] &&
            "$bld/cli/oncectl" stats >/dev/null 2>&1; then
            break
        fi
        kill -0 "$onced_pid" 2>/dev/null || fail "onced exited"
        sleep 0.05
    done
    "$bld/cli/oncectl" stats >/dev/null || fail "onced never answered"
}

stop_onced() {
    kill -TERM "$onced_pid"
    wait "$onced_pid" || fail "onced did not stop cleanly"
    onced_pid=
}

mkdir -p "$tmp/run"
ln -s "$bld" "$tmp/run/build"
ln -s "$src/examples" "$tmp/run/examples"
start_onced data

echo "== quick start: oncectl (README block, as written)"
block oncectl >"$tmp/oncectl.sh"
(cd "$tmp/run" && bash "$tmp/oncectl.sh") >"$tmp/oncectl.out" 2>&1 ||
    fail "the oncectl block failed: $(cat "$tmp/oncectl.out")"
# Times differ from run to run ("retry until ..."): compared as <time>.
stamp='s/[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z/<time>/g'
block "oncectl output" | sed "$stamp" >"$tmp/oncectl.expected"
sed -i "$stamp" "$tmp/oncectl.out"
if ! diff -u "$tmp/oncectl.expected" "$tmp/oncectl.out"; then
    fail "the oncectl block's output differs from the README's (above)"
fi
cat "$tmp/oncectl.out"

echo "== quick start: the C program (README block, as written)"
block c >"$tmp/c.sh"
(cd "$tmp/run" && bash -e "$tmp/c.sh") >"$tmp/c.out" 2>&1 ||
    fail "the C block failed: $(cat "$tmp/c.out")"
n=$(grep -c '^rpc id [0-9]*:[0-9]*: hello = [0-9]*, sent again: [0-9]* (replayed)$' \
    "$tmp/c.out" || true)
[ "$n" -eq 2 ] || fail "want 2 replayed hello lines, got $n: $(cat "$tmp/c.out")"
grep 'hello =' "$tmp/c.out"

# What the C block used is what was installed: the .pc and the CMake package
# under the prefix, and hello linked to the installed libonce.
[ -f "$bld/prefix/lib/pkgconfig/once.pc" ] || fail "no installed once.pc"
[ -f "$bld/prefix/lib/cmake/once/onceConfig.cmake" ] ||
    fail "no installed onceConfig.cmake"
# (ldd's output is taken whole first: grep -q would stop reading early and
# ldd's SIGPIPE fail the pipeline under pipefail.)
libs=$(LD_LIBRARY_PATH="$bld/prefix/lib" ldd "$bld/hello")
grep -q "/prefix/lib/libonce.so" <<<"$libs" ||
    fail "build/hello does not use the installed libonce: $libs"
libs=$(ldd "$bld/hello-cmake/hello")
grep -q "/prefix/lib/libonce.so" <<<"$libs" ||
    fail "build/hello-cmake/hello does not use the installed libonce: $libs"

stop_onced

# The docs' examples: each file against a fresh onced, blocks in order.
n=0
for doc in $DOCS; do
    names=$(sed -n 's/^<!-- run: \(.*\) -->$/\1/p' "$src/$doc" |
        grep -v ' output$' || true)
    [ -n "$names" ] || fail "$doc has no <!-- run: NAME --> example"
    n=$((n + 1))
    start_onced "doc$n"
    while IFS= read -r name; do
        echo "== $doc: $name (as written)"
        marked_block "$src/$doc" "run: $name" >"$tmp/doc.sh"
        if grep -q 'build/python' "$tmp/doc.sh" &&
            [ ! -d "$bld/python/once" ]; then
            echo "skipped: this build has no Python package"
            continue
        fi
        (cd "$tmp/run" && bash -e "$tmp/doc.sh") >"$tmp/doc.out" 2>&1 ||
            fail "$doc: the '$name' block failed: $(cat "$tmp/doc.out")"
        sed -i "$stamp" "$tmp/doc.out"
        marked_block "$src/$doc" "run: $name output" |
            sed "$stamp" >"$tmp/doc.expected"
        if [ -s "$tmp/doc.expected" ] &&
            ! diff -u "$tmp/doc.expected" "$tmp/doc.out"; then
            fail "$doc: the '$name' block's output differs (above)"
        fi
        cat "$tmp/doc.out"
    done <<<"$names"
    stop_onced
done
echo "test_frontdoor: OK"
