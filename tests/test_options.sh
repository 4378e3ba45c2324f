#!/usr/bin/env bash
#
# test_options.sh SOURCE_DIR ONCED OPTIONS_DUMP ONCECTL — onced's options
# table (server/options.c) and oncectl's global options (cli/globals.c)
# are the one place an option is declared.
#
# Owns: the checks that, against the table as tests/options_dump.c prints
# it,
#  - `onced --help` lists exactly the table's options;
#  - docs/man/onced.8 lists exactly the table's options (a .TP tag each),
#    and each option with a number, duration, size or name as default
#    says "default VALUE" with the table's value in its paragraph;
#  - the SIGHUP sentences of the man page, of `onced --help` and of
#    packaging/onced.conf's header name exactly the reloadable options
#    (--config aside: it names the file);
#  - every key in packaging/onced.conf, commented out or not, is a row
#    the file may set (config, help and version are not), and each of its "Defaults, shown for reference" is the table's;
#  - the global options of `oncectl --help` (printed from cli/globals.c's
#    table) are exactly the .TP tags of oncectl(1)'s GLOBAL OPTIONS.
# So an option added to the table but not to the page, or a default or
# reloadable flag changed in one place only, fails here.
# Never: starts a server (onced runs only for --help).
set -euo pipefail

src=$(cd "$1" && pwd)
onced=$2
dump=$3
oncectl=$4
man="$src/docs/man/onced.8"
conf="$src/packaging/onced.conf"
tmp=$(mktemp -d /tmp/once-options-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bad=0

fail() {
    echo "test_options: $*" >&2
    bad=1
}

"$dump" >"$tmp/table"
[ -s "$tmp/table" ] || { echo "test_options: empty table" >&2; exit 1; }
cut -f1 "$tmp/table" | sed 's/^/--/' | sort >"$tmp/names"

# --help: the option lines ("  --name ..." or "  -h, --help"), whole names.
"$onced" --help | grep -oE '^  (-[a-zA-Z], )?--[a-z][a-z-]*[a-z]' |
    grep -oE -- '--[a-z][a-z-]*' | sort -u >"$tmp/help"
d=$(diff "$tmp/names" "$tmp/help") ||
    fail "the table (<) and onced --help (>) list other options: $d"

# The page: the tag line after each .TP (roff writes a dash as \-).
awk '/^\.TP/ { getline; print }' "$man" |
    grep -oE '(\\-){2}[a-z][a-z\\-]*[a-z]' | sed -E 's/\\-/-/g' |
    sort -u >"$tmp/man"
d=$(diff "$tmp/names" "$tmp/man") ||
    fail "the table (<) and docs/man/onced.8 (>) list other options: $d"

# An option's paragraph in the page, on one line, dashes plain (awk reads
# to the end: an early exit would fail sed under pipefail).
paragraph() {
    sed -E 's/\\-/-/g' "$man" | awk -v opt="--$1" '
        on && /^\.(TP|SH)/ { on = 0; done = 1 }
        on { printf "%s ", $0 }
        !done && prev ~ /^\.TP/ && index($0, opt) {
            rest = substr($0, index($0, opt) + length(opt), 1)
            if (rest !~ /[a-z-]/) on = 1
        }
        { prev = $0 }'
}
while IFS=$'\t' read -r name arg kind def _; do
    case "$kind" in count | duration | bytes | string) ;; *) continue ;; esac
    [ "$def" != "-" ] || continue
    p=$(paragraph "$name")
    grep -qE "default ${def//./\\.}([^0-9A-Za-z]|$)" <<<"$p" ||
        fail "docs/man/onced.8: --$name does not say \"default $def\": $p"
done <"$tmp/table"

# The reloadable options, as "a b c" in table order (--config aside).
awk -F'\t' '$5 == "reload" && $1 != "config" { print $1 }' "$tmp/table" |
    sort >"$tmp/reload"
named_in() { # the table's options named as whole words in text on stdin
    local text
    text=$(cat)
    cut -f1 "$tmp/table" | grep -vx config | while read -r n; do
        if grep -qE "(^|[^a-z-])$n([^a-z-]|$)" <<<"$text"; then echo "$n"; fi
    done | sort
}
sed -n '/^\.B SIGHUP/,/^\.SH/p' "$man" | sed -E 's/\\-/-/g' |
    named_in >"$tmp/man-reload"
d=$(diff "$tmp/reload" "$tmp/man-reload") ||
    fail "reloadable in the table (<) and in onced.8's SIGHUP (>): $d"
"$onced" --help | sed -n '/SIGHUP/,/next start/p' | named_in >"$tmp/help-reload"
d=$(diff "$tmp/reload" "$tmp/help-reload") ||
    fail "reloadable in the table (<) and in onced --help's SIGHUP (>): $d"
sed -n '/SIGHUP/,/^$/p' "$conf" | grep '^#' | named_in >"$tmp/conf-reload"
d=$(diff "$tmp/reload" "$tmp/conf-reload") ||
    fail "reloadable in the table (<) and in onced.conf's header (>): $d"

# packaging/onced.conf: every key a row; its reference defaults the table's.
sed -nE 's/^#? *([a-z][a-z-]*) = (.*)$/\1\t\2/p' "$conf" >"$tmp/conf"
[ -s "$tmp/conf" ] || fail "no key read from $conf"
while IFS=$'\t' read -r key value; do
    awk -F'\t' -v k="$key" '$1 == k && $6 == "key" { f = 1 } END { exit !f }' \
        "$tmp/table" ||
        fail "packaging/onced.conf: $key is no configuration key of the table"
done <"$tmp/conf"
sed -n '/^# Defaults/,$p' "$conf" |
    sed -nE 's/^# ([a-z][a-z-]*) = (.*)$/\1\t\2/p' >"$tmp/conf-defaults"
while IFS=$'\t' read -r key value; do
    def=$(awk -F'\t' -v k="$key" '$1 == k { print $4 }' "$tmp/table")
    [ "$def" = "$value" ] ||
        fail "packaging/onced.conf: default $key = $value, the table's is $def"
done <"$tmp/conf-defaults"

# oncectl: its --help's global option lines against oncectl(1)'s section.
"$oncectl" --help | sed -n '/^Global options/,/^$/p' |
    grep -oE '^  (-[a-zA-Z], )?--[a-z][a-z-]*[a-z]' |
    grep -oE -- '--[a-z][a-z-]*' | sort -u >"$tmp/ctl-help"
[ -s "$tmp/ctl-help" ] || fail "no global option read from oncectl --help"
sed -n '/^\.SH GLOBAL OPTIONS/,/^\.SH [^G]/p' "$src/docs/man/oncectl.1" |
    awk '/^\.TP/ { getline; print }' |
    grep -oE '(\\-){2}[a-z][a-z\\-]*[a-z]' | sed -E 's/\\-/-/g' |
    sort -u >"$tmp/ctl-man"
d=$(diff "$tmp/ctl-help" "$tmp/ctl-man") ||
    fail "oncectl --help's global options (<) and oncectl(1)'s (>): $d"

[ "$bad" = 0 ] || exit 1
echo "test_options: OK ($(wc -l <"$tmp/table") options)"
