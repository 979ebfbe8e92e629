#!/bin/sh
# deps.sh demo|test|plots - installs what `make demo`, `make test` or
# `make plots` needs and is missing, so the README's two commands work on a
# fresh Debian machine.
#   demo:  a C compiler, make, python3 with numpy (the model maker)
#   test:  the above plus node and npm, curl (the download test), valgrind,
#          and the pinned npm packages (npm ci)
#   plots: the demo's plus gnuplot (gnuplot-nox) for benchmarks/plots.sh;
#          neither make test nor CI needs it
# Uses apt-get (through sudo when not root). Prints what it installs; does
# nothing when everything is present. Exit 1 if something cannot be had.
set -eu
what=${1:-demo}
pkgs=""
command -v cc >/dev/null 2>&1 || pkgs="$pkgs build-essential"
command -v make >/dev/null 2>&1 || pkgs="$pkgs make"
/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || pkgs="$pkgs python3 python3-numpy"
if [ "$what" = test ]; then
    command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
    command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
    command -v curl >/dev/null 2>&1 || pkgs="$pkgs curl"
    command -v valgrind >/dev/null 2>&1 || pkgs="$pkgs valgrind"
    command -v ps >/dev/null 2>&1 || pkgs="$pkgs procps"
fi
if [ "$what" = plots ]; then
    command -v gnuplot >/dev/null 2>&1 || pkgs="$pkgs gnuplot-nox"
fi
if [ -n "$pkgs" ]; then
    echo "k3: installing missing packages:$pkgs"
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "k3: no apt-get here; install:$pkgs" >&2
        exit 1
    fi
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $pkgs
fi
# npm ls fails when a pinned package is missing or at another version.
if [ "$what" = test ] && [ -f package-lock.json ] && ! npm ls >/dev/null 2>&1; then
    echo "k3: installing the pinned npm packages (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
fi
exit 0
