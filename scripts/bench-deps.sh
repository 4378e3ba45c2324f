#!/usr/bin/env bash
#
# bench-deps.sh — installs the Debian 12 packages that bench_compare and the
# plots need: the peers it measures once against (Redis 7, PostgreSQL 15),
# their client libraries, and gnuplot.
#
# Owns: the list of packages only the benchmarks need, kept apart from
# scripts/deps.sh. PostgreSQL 15 is in both: `make test` runs the
# PostgreSQL receiver's test (tests/python/test_py_billing.py).
# Invariant: idempotent; when every package is present it prints nothing and
# touches nothing (no apt-get update, no network).
# Never: upgrades or removes packages, or leaves the distribution's Redis or
# PostgreSQL service running (bench_compare starts its own on temp dirs).
set -euo pipefail

PACKAGES=(
    redis-server
    postgresql-15
    libhiredis-dev
    libpq-dev
    gnuplot-nox
)

missing=()
for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "bench-deps.sh: missing ${missing[*]}; not root and no sudo" >&2
        exit 1
    fi
    SUDO=(sudo)
fi

echo "bench-deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
    apt-get install -y -q --no-install-recommends "${missing[@]}"

# Where a package just installed started its service (machines without
# systemd may run the init scripts), stop it: bench_compare runs its own
# instances on temp dirs. Services that were there before are left alone.
for p in "${missing[@]}"; do
    case "$p" in
    redis-server) svc=redis-server ;;
    postgresql-15) svc=postgresql ;;
    *) continue ;;
    esac
    if [ -x "/etc/init.d/$svc" ]; then
        "${SUDO[@]}" "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
    fi
done
