#!/bin/sh
# check_no_seams.sh — the shipped onced carries no test seam.
#
#   scripts/check_no_seams.sh ONCED ONCED_TEST   (run by ctest: test_no_seams)
#
# Owns: the names of the test seams' symbols (below).
# Invariant: a seam is a symbol — a function or variable of store/fault.c
# or server/test_seams.c, or a hold — so the check reads the binaries'
# symbol tables (nm: defined, local and undefined alike), never their
# strings. ONCED must have none of them; ONCED_TEST must have every kind,
# so a pattern that stops matching makes the check fail instead of pass.
# Never: passes on a binary nm cannot read (a stripped or missing file).
set -eu

onced=$1
onced_test=$2

# Seams by the names they are given in the code: the fault points and
# holds (store/fault.h: fault_point, fault_drop, fault_fail, fault_hold,
# fault_arm and their state), the environment hooks (server/test_seams.c:
# test_seams_*), and any other *_hold* symbol (a hold of its own, outside
# fault.c). nng's own *_hold functions are not ours, nor conns_hold and
# listener_hold (server/conns.c, server/listener.c: a request holding its
# connection's slot, shipped; listener_hold is static and shows only in a
# build that does not inline it, as make asan's Debug build).
seams='^(fault_|test_seams_)|(^|_)hold($|_)'

symbols() {
    # nm prints "[value] type name"; the name is the last field.
    nm "$1" >"$tmp" || {
        echo "test_no_seams: nm cannot read $1" >&2
        exit 1
    }
    awk '{print $NF}' "$tmp" | grep -E "$seams" | grep -v -E '^(nng_|conns_hold$|listener_hold$)' | sort -u
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

shipped=$(symbols "$onced")
if [ -n "$shipped" ]; then
    echo "test_no_seams: the shipped $onced has test seams:" >&2
    echo "$shipped" | sed 's/^/  /' >&2
    exit 1
fi

# The control: the test build has each kind, or the pattern is blind.
control=$(symbols "$onced_test")
for kind in '^fault_point$' '^fault_drop$' '^fault_fail$' '^fault_hold$' \
    '^fault_arm$' '^test_seams_apply$'; do
    if ! echo "$control" | grep -qE "$kind"; then
        echo "test_no_seams: $onced_test lacks $kind: the check is blind" >&2
        exit 1
    fi
done
echo "test_no_seams: $onced has no test seam;" \
    "$onced_test has $(echo "$control" | wc -l) seam symbols"
