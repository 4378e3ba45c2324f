#!/usr/bin/env bash
#
# test_service.sh SOURCE_DIR BUILD_DIR — the service files: the systemd
# unit, the packaged configuration and the man pages.
#
# Owns: the checks that
#  - packaging/onced.service passes `systemd-analyze verify` with nothing
#    printed (verify exits 0 even for a directive it ignores, so any output
#    fails the test) and keeps an exposure level below 2.0 in
#    `systemd-analyze security --offline` (the sandboxing is in force);
#  - onced starts with packaging/onced.conf as its --config (every key in it
#    is one onced accepts), the flags --data and --listen winning over the
#    file's, and stops cleanly;
#  - `onced --help` and docs/man/onced.8 list the same options, and every
#    global option in `oncectl --help` is in docs/man/oncectl.1, each
#    option matched whole (not as a prefix of a longer one).
# systemd is not running in the containers this runs in: the unit is
# verified offline, and the notify protocol itself is tested by test_config
# (NOTIFY_SOCKET). systemd-analyze comes from Debian's systemd package
# (scripts/deps.sh installs it; it needs no running systemd): without it
# the test fails.
# Never: installs anything or talks to a running systemd.
set -euo pipefail

src=$(cd "$1" && pwd)
bld=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/once-service-XXXXXX)
onced_pid=

cleanup() {
    if [ -n "$onced_pid" ] && kill -0 "$onced_pid" 2>/dev/null; then
        kill -KILL "$onced_pid"
        wait "$onced_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "test_service: FAILED: $*" >&2
    exit 1
}

echo "== the unit"
if command -v systemd-analyze >/dev/null; then
    # ExecStart must name an existing binary: this build's onced.
    sed "s#/usr/bin/onced#$bld/server/onced#" \
        "$src/packaging/onced.service" >"$tmp/onced.service"
    out=$(systemd-analyze verify --man=no "$tmp/onced.service" 2>&1) ||
        fail "systemd-analyze verify: $out"
    [ -z "$out" ] || fail "systemd-analyze verify printed: $out"
    sec=$(systemd-analyze security --offline=yes "$tmp/onced.service" 2>&1 |
        sed -n 's/.*Overall exposure level for onced.service: \([0-9.]*\).*/\1/p')
    [ -n "$sec" ] || fail "systemd-analyze security gave no exposure level"
    awk -v s="$sec" 'BEGIN { exit !(s < 2.0) }' ||
        fail "exposure level $sec (want below 2.0): sandboxing lost"
    echo "verify: clean; exposure level $sec"
else
    fail "no systemd-analyze (Debian package systemd; scripts/deps.sh)"
fi

echo "== onced with the packaged configuration"
"$bld/server/onced" --config "$src/packaging/onced.conf" \
    --data "$tmp/data" --listen "ipc://$tmp/s.ipc" >"$tmp/log" 2>&1 &
onced_pid=$!
for _ in $(seq 1 200); do
    grep -q "ready (pid" "$tmp/log" && break
    kill -0 "$onced_pid" 2>/dev/null || fail "onced exited: $(cat "$tmp/log")"
    sleep 0.05
done
grep -q "ready (pid" "$tmp/log" || fail "onced never ready: $(cat "$tmp/log")"
grep -q "listening on ipc://$tmp/s.ipc" "$tmp/log" ||
    fail "the --listen flag did not win: $(cat "$tmp/log")"
grep -q "/run/once" "$tmp/log" && fail "the file's listen was used too"
[ -d "$tmp/data" ] || fail "the --data flag did not win"
"$bld/cli/oncectl" --server "ipc://$tmp/s.ipc" stats >/dev/null ||
    fail "onced does not answer"
kill -TERM "$onced_pid"
wait "$onced_pid" || fail "onced did not stop cleanly: $(cat "$tmp/log")"
onced_pid=

echo "== man pages"
# Options compared whole, never as prefixes (--listen must not pass for
# --listen-check): from --help, the option lines ("  --name ..." or
# "  -h, --help"); from a page, the tag line after each .TP (roff writes a
# dash as \-).
help_opts() {
    grep -oE '^  (-[a-zA-Z], )?--[a-z][a-z-]*[a-z]' |
        grep -oE -- '--[a-z][a-z-]*' | sort -u
}
man_opts() {
    awk '/^\.TP/ { getline; print }' "$1" |
        grep -oE '(\\-){2}[a-z][a-z\\-]*[a-z]' | sed -E 's/\\-/-/g' | sort -u
}
"$bld/server/onced" --help | help_opts >"$tmp/help-onced"
man_opts "$src/docs/man/onced.8" >"$tmp/man-onced"
[ -s "$tmp/help-onced" ] || fail "no options read from onced --help"
d=$(diff "$tmp/help-onced" "$tmp/man-onced") ||
    fail "onced --help (<) and docs/man/onced.8 (>) list other options: $d"
"$bld/cli/oncectl" --help | sed -n '/^Global options/,/^$/p' | help_opts \
    >"$tmp/help-oncectl"
man_opts "$src/docs/man/oncectl.1" >"$tmp/man-oncectl"
[ -s "$tmp/help-oncectl" ] || fail "no options read from oncectl --help"
missing=$(comm -23 "$tmp/help-oncectl" "$tmp/man-oncectl" | tr '\n' ' ')
[ -z "$missing" ] || fail "docs/man/oncectl.1 lacks $missing"
if command -v man >/dev/null; then
    for page in onced.8 oncectl.1; do
        w=$(MANWIDTH=80 man --warnings -l "$src/docs/man/$page" 2>&1 >/dev/null)
        [ -z "$w" ] || fail "man $page warns: $w"
    done
fi
echo "test_service: OK"
