#!/usr/bin/env bash
#
# deps.sh — installs the Debian 12 packages that build and test once.
#
# Owns: the list of system packages the build needs.
# Invariant: idempotent; when every package is present it prints nothing and
# touches nothing (no apt-get update, no network).
# Never: upgrades or removes packages, runs apt-get update when nothing is
# missing, or leaves the distribution's PostgreSQL service running (the
# tests start their own clusters on temp dirs).
set -euo pipefail

PACKAGES=(
    build-essential
    cmake
    pkg-config
    libprotobuf-c-dev
    protobuf-c-compiler
    libnng-dev
    libleveldb-dev
    libsnappy-dev
    libsodium-dev
    libcmocka-dev
    libsystemd-dev
    systemd
    clang-format
    openssl
    python3
    python3-protobuf
    python3-pytest
    protobuf-compiler
    curl
    libcurl4-openssl-dev
    libcjson-dev
    etcd-server
    etcd-client
    gdb
    gnuplot-nox
    # tests/history/netns.py (the campaign's partition nemeses): network
    # namespaces, veth pairs and a bridge, cut with `ip link`.
    iproute2
    # tests/history/campaign.py's clock-jump nemesis: libfaketime preloaded
    # into one replica, its offset changed at run time (docs/testing notes in
    # tests/README.md say what it does to onced's clocks).
    faketime
    # tests/python/test_py_billing.py and examples/billing_receiver.py:
    # a PostgreSQL of their own (initdb + pg_ctl in a temp dir), psycopg2.
    postgresql-15
    python3-psycopg2
    # tests/python/test_py_node.py: examples/once_http_client.mjs, Node 18+
    # (its built-in fetch and crypto, no npm package).
    nodejs
    # tests/python/test_py_console.py: the operator console in a real
    # browser, headless (--dump-dom, --screenshot).
    chromium
)

# Extra groups, only for the steps that need them: `deps.sh fuzz` (make
# fuzz: clang with libFuzzer and its sanitizer runtimes), `deps.sh valgrind`.
for group in "$@"; do
    case "$group" in
    fuzz) PACKAGES+=(clang libclang-rt-14-dev) ;;
    valgrind) PACKAGES+=(valgrind) ;;
    *)
        echo "deps.sh: unknown group \"$group\" (fuzz, valgrind)" >&2
        exit 2
        ;;
    esac
done

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
        echo "deps.sh: missing ${missing[*]}; not root and no sudo" >&2
        exit 1
    fi
    SUDO=(sudo)
fi

echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
    apt-get install -y -q --no-install-recommends "${missing[@]}"

# A PostgreSQL just installed may have started its service (machines
# without systemd run the init script): stop it. One already there is left.
for p in "${missing[@]}"; do
    if [ "$p" = postgresql-15 ] && [ -x /etc/init.d/postgresql ]; then
        "${SUDO[@]}" /etc/init.d/postgresql stop >/dev/null 2>&1 || true
    fi
done
