#!/bin/sh
# check_include_cycles.sh — no include circle in libonce (client/),
# oncectl (cli/), onced (server/), the grant rules (grants/) or the HTTP
# front door's wire format (http/), file by
# file and module by module.
#
#   scripts/check_include_cycles.sh [SRCDIR]     (run by ctest: check_include_cycles)
#
# A module is a .c file and the .h of the same name (call.c + call.h); an
# edge A -> B means a file of module A includes a header of module B
# ("conn.h", "once/client.h" or <once/client.h>; headers from outside these
# folders — base/, proto/, system — are leaves and not followed). Since a file
# can only call what a header it includes declares, a circle between
# modules is a call circle too; a circle between headers is an include
# circle. A call from one libonce file to a public once_* function defined
# in another (declared in once/*.h, so invisible to the includes) is an
# edge too. Prints every module in a circle and exits 1, else prints the
# modules in layer order (each one only includes those before it) and
# exits 0.
set -eu

src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$src"

{
for dir in client cli server grants http; do
    find "$dir" -maxdepth 3 -name '*.[ch]' -o -maxdepth 3 -name '*.h.in' |
        sort |
        while read -r f; do
            grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<][^">]+[">]' "$f" |
                sed -E 's/^[^"<]*["<]([^">]+)[">].*/\1/' |
                while read -r inc; do printf '%s %s\n' "$f" "$inc"; done
            printf '%s\n' "$f" # the file itself, even with no includes
        done
done
# Public functions: where each is defined, and which libonce file calls it.
for f in client/*.c; do
    grep -oE '^once_[a-z0-9_]+\(' "$f" | tr -d '(' |
        while read -r fn; do printf 'DEF %s %s\n' "$f" "$fn"; done
    grep -vE '^once_[a-z0-9_]+\(' "$f" | grep -oE '\<once_[a-z0-9_]+\(' |
        tr -d '(' | sort -u |
        while read -r fn; do printf 'CALL %s %s\n' "$f" "$fn"; done
done
} | awk -v ok="$(ls client/*.h cli/*.h server/*.h grants/*.h http/*.h client/include/once/*.h client/include/once/*.h.in 2>/dev/null | tr '\n' ' ')" '
function module(path,   m) {
    m = path
    sub(/\.h\.in$/, "", m); sub(/\.[ch]$/, "", m)
    sub(/^client\/include\//, "", m)   # public headers: once/client
    return m
}
BEGIN {
    n = split(ok, hs, " ")
    for (i = 1; i <= n; i++) {
        have[hs[i]] = 1
        if (hs[i] ~ /\.h\.in$/) { h = hs[i]; sub(/\.in$/, "", h); have[h] = 1; real[h] = hs[i] }
    }
}
$1 == "DEF" { def[$3] = module($2); next }
$1 == "CALL" { calls[++ncalls] = module($2) " " $3; next }
{
    file = $1
    dir = file; sub(/\/[^\/]*$/, "", dir)
    from = module(file)
    nodes[from] = 1
    if (NF < 2) next
    inc = $2
    target = ""
    if (inc ~ /^once\//) {
        target = "client/include/" inc
    } else if (inc in have) {                     # rooted: "client/conn.h"
        target = inc
    } else if ((dir "/" inc) in have) {
        target = dir "/" inc
    }
    if (target == "" || !(target in have)) next   # outside: a leaf
    add(from, module(target))                     # x.c -> x.h: no edge
}
function add(from, to) {
    nodes[from] = 1
    nodes[to] = 1
    if (from == to || ((from SUBSEP to) in edge)) return
    edge[from, to] = 1
    out[from]++
    srcs[to] = srcs[to] " " from
}
END {
    for (i = 1; i <= ncalls; i++) {
        split(calls[i], cf, " ")
        if (cf[2] in def) add(cf[1], def[cf[2]])
    }
    # Kahn from the leaves: repeatedly take modules whose includes are all
    # taken. What is left is in (or above) a circle.
    left = 0
    for (m in nodes) left++
    order = ""
    layer = 0
    while (left > 0) {
        took = 0
        for (m in nodes) if (!(m in done) && out[m] == 0) ready[m] = 1
        line = ""
        for (m in ready) {
            done[m] = 1; left--; took++
            line = line " " m
            k = split(srcs[m], fs, " ")
            for (i = 1; i <= k; i++) out[fs[i]]--
        }
        delete ready
        if (took == 0) break
        layer++
        printf "layer %d:%s\n", layer, line
    }
    if (left > 0) {
        print "include circle among these modules:" > "/dev/stderr"
        for (a in nodes) if (!(a in done))
            for (b in nodes) if (!(b in done) && ((a SUBSEP b) in edge))
                printf "  %s -> %s\n", a, b > "/dev/stderr"
        exit 1
    }
    print "no include circle in client/, cli/, server/, grants/ or http/"
}'
