#!/usr/bin/env bash
#
# deb-check.sh — installs the packages `make deb` built and tries them as a
# user of the packages would (CI runs it as root on its fresh machine).
#
# Owns: the check that the four packages install together with apt, that
# the installed onced and oncectl run, that examples/hello.c builds
# against the installed headers and library — with pkg-config and with
# CMake find_package(once) — and gets a replay from the installed onced
# started with the packaged /etc/once/onced.conf (data and listen given as
# flags, which win over the file), and that Debian's /usr/bin/python3
# imports the installed `once` package (python3-once) and gets an
# increment and its replay from the same onced; that pkg-config prints a
# plain -lonce; and that a plain oncectl (no --server, no ONCE_SERVER)
# reaches onced started with the packaged configuration alone.
# Invariant: nothing outside build-deb/ and a temp dir is written, except
# what apt installs. Never: removes packages (--purge at the end does).
set -euo pipefail

cd "$(dirname "$0")/.."
DEB_BUILD=${DEB_BUILD:-build-deb}

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    SUDO=(sudo)
fi

debs=("$DEB_BUILD"/once_*.deb "$DEB_BUILD"/libonce0_*.deb "$DEB_BUILD"/libonce-dev_*.deb
    "$DEB_BUILD"/python3-once_*.deb)
for d in "${debs[@]}"; do
    [ -f "$d" ] || { echo "deb-check: no $d (run make deb)" >&2; exit 1; }
done

echo "deb-check: installing ${debs[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${debs[@]/#/./}"

echo "deb-check: installed programs"
/usr/bin/onced --version
/usr/bin/oncectl --version
for f in /lib/systemd/system/onced.service /etc/once/onced.conf \
    /usr/share/man/man8/onced.8.gz /usr/share/man/man1/oncectl.1.gz \
    /usr/share/once/proto/once.proto /usr/include/once/client.h; do
    [ -f "$f" ] || { echo "deb-check: $f not installed" >&2; exit 1; }
done
getent passwd once >/dev/null || { echo "deb-check: no user once" >&2; exit 1; }

tmp=$(mktemp -d /tmp/once-deb-check-XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        wait "$pid" || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "deb-check: examples/hello.c against the installed libonce"
libs=$(pkg-config --libs once | tr -d " ")
[ "$libs" = "-lonce" ] || {
    echo "deb-check: pkg-config --libs once printed '$libs', not -lonce" >&2
    exit 1
}
cc examples/hello.c $(pkg-config --cflags --libs once) -o "$tmp/hello"
cmake -S examples -B "$tmp/hello-cmake" >/dev/null
cmake --build "$tmp/hello-cmake" >/dev/null

/usr/bin/onced --config /etc/once/onced.conf --data "$tmp/data" \
    --listen "ipc://$tmp/once.ipc" >"$tmp/onced.log" 2>&1 &
pid=$!
export ONCE_SERVER="ipc://$tmp/once.ipc"
for _ in $(seq 1 200); do
    oncectl stats >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/onced.log"; exit 1; }
    sleep 0.05
done
"$tmp/hello"
"$tmp/hello-cmake/hello"

echo "deb-check: the installed python3-once"
# -I: neither the working directory (this checkout's python/) nor PYTHON*
# variables can shadow the installed package.
/usr/bin/python3 -I - "$ONCE_SERVER" <<'PY'
import sys

import once

assert once.__file__.startswith("/usr/lib/python3/dist-packages/"), once.__file__
with once.Client(sys.argv[1]) as c:
    first = c.counter_incr_reply("deb-check-py", by=2)
    # The same rpc id from another handle while the lease lives: the
    # stored reply.
    with once.Client(sys.argv[1], lease=False) as r:
        again = r.counter_incr_reply("deb-check-py", by=2,
                                     rpc_id=first.rpc_id)
assert first.value == 2 and not first.replayed, (first.value, first.replayed)
assert again.value == 2 and again.replayed, (again.value, again.replayed)
print("python3-once: counter_incr gave", first.value, "rpc id", first.rpc_id,
      "and its retry replayed", again.value, "from", once.__file__)
PY
kill -TERM "$pid"
wait "$pid"
pid=

echo "deb-check: a plain oncectl reaches onced started with the packaged configuration"
# As the unit runs it (its RuntimeDirectory made by hand), with only the
# data folder moved; no --server and no ONCE_SERVER for oncectl.
unset ONCE_SERVER
"${SUDO[@]}" install -d -m 0750 /run/once
/usr/bin/onced --config /etc/once/onced.conf --data "$tmp/data-conf" \
    >"$tmp/onced-conf.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
    oncectl counter get deb-check-plain >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/onced-conf.log"; exit 1; }
    sleep 0.05
done
oncectl counter incr deb-check-plain
oncectl --json counter get deb-check-plain | grep -q '"value": *1' || {
    echo "deb-check: a plain oncectl did not reach the packaged listeners" >&2
    cat "$tmp/onced-conf.log" >&2
    exit 1
}
kill -TERM "$pid"
wait "$pid"
pid=
echo "deb-check: OK"

if [ "${1:-}" = --purge ]; then
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get purge -y -q once libonce0 libonce-dev python3-once
fi
