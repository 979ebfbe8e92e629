#!/bin/sh
# deps.sh demo|test|plots|windows - installs what `make demo`, `make test` or
# `make plots` needs and is missing, so the README's two commands work on a
# fresh Debian machine (scripts/fresh-check.sh proves it on a new root).
#   demo:  a C99 compiler with OpenMP and libc headers (build-essential),
#          make, /usr/bin/python3 with numpy (the model and tokenizer makers),
#          pkg-config with libpng-dev and libjpeg62-turbo-dev (image input)
#          and liburing-dev (the io_uring reader, make's URING=1), libedit-dev
#          (the chat's line editor, make's EDIT=1)
#   test:  the above plus everything a step of tests/run.sh runs:
#          node and npm with the pinned npm packages (npm ci: tokenizer
#          oracle, serve gate client), curl (download and serve gates),
#          chromium (gate 67: the chat page in a headless browser),
#          valgrind (gate 75), ps (procps, gate 40), and for gate 60 the
#          aarch64 cross compiler with its libc (gcc-aarch64-linux-gnu,
#          libc6-dev-arm64-cross) and qemu-aarch64 (qemu-user), and
#          torch for /usr/bin/python3 (python3-torch, gate 14: k3-nano
#          against the torch model it was trained as; gate 16: the vision
#          reference against torch) and Pillow (python3-pil, gate 16: the
#          image resize against Pillow's own)
#   plots: the demo's plus gnuplot (gnuplot-nox) for benchmarks/plots.sh;
#          neither make test nor CI needs it
#   windows: the demo's plus what `make windows` and `make test-windows`
#          need: the mingw-w64 cross compiler (gcc-mingw-w64-x86-64), Wine
#          (wine64: it runs console programs alone) and curl
# Each need is detected by using it (a compile and run of a small OpenMP
# program, natively and cross with -static as `make cross-aarch64` links),
# not by a command's name alone; after installing, every check runs again.
# Uses apt-get (through sudo when not root). Prints what it installs; does
# nothing when everything is present. Exit 1 if something cannot be had,
# 2 for an unknown argument.
set -eu
what=${1:-demo}
case "$what" in
demo | test | plots | windows) ;;
*)
    echo "usage: sh scripts/deps.sh demo|test|plots|windows" >&2
    exit 2
    ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/t.c" <<'EOF'
#include <math.h>
#include <omp.h>
#include <stdio.h>
int main(void) {
    printf("%d %.3f\n", omp_get_max_threads() > 0, sqrt(2.0));
    return 0;
}
EOF

has() { command -v "$1" >/dev/null 2>&1; }
# builds CC [FLAGS]: CC compiles and links the test program with the flags
# the Makefile uses (C99, OpenMP, pthreads, libm).
builds() {
    "$1" -std=c99 ${2:-} -fopenmp -pthread -o "$tmp/t.$1" "$tmp/t.c" -lm >/dev/null 2>&1
}
runs() { "$@" 2>/dev/null | grep -q '^1 1.414$'; }

# A node from elsewhere (NodeSource, a tarball) brings its own npm: Debian's
# npm would pull in Debian's nodejs and conflict with it. So npm is installed
# only with Debian's nodejs (its package owns node and provides no npm).
node_is_debians() {
    node=$(readlink -f "$(command -v node)")
    [ "$(dpkg-query -S "$node" 2>/dev/null | cut -d: -f1)" = nodejs ] &&
        ! dpkg-query -W -f='${Provides}' nodejs 2>/dev/null | grep -qw npm
}
if [ "$what" = test ] && has node && ! has npm && ! node_is_debians; then
    echo "k3: $(command -v node) is not Debian's nodejs and has no npm;" \
        "install the npm that goes with it" >&2
    exit 1
fi

# missing: prints the packages whose need is not met (nothing when all are).
missing() {
    { builds cc && runs "$tmp/t.cc"; } || echo build-essential
    has make || echo make
    # util/xxh3.c inlines xxhash.h (header only: nothing links libxxhash)
    [ -f /usr/include/xxhash.h ] || echo libxxhash-dev
    /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || echo python3 python3-numpy
    # PNG and JPEG decoding (make's IMAGE=1, found by pkg-config)
    has pkg-config || echo pkgconf
    pkg-config --exists libpng 2>/dev/null || echo libpng-dev
    pkg-config --exists libjpeg 2>/dev/null || echo libjpeg62-turbo-dev
    # the io_uring reader (make's URING=1, found by pkg-config; Linux only)
    [ "$(uname -s)" != Linux ] || pkg-config --exists liburing 2>/dev/null || echo liburing-dev
    # the chat's line editor (make's EDIT=1, found by pkg-config)
    pkg-config --exists libedit 2>/dev/null || echo libedit-dev
    if [ "$what" = test ]; then
        # the chat page's browser test (gate 67, driven by playwright-core)
        [ -x /usr/bin/chromium ] || echo chromium
        has node || echo nodejs
        has npm || echo npm
        has curl || echo curl
        has valgrind || echo valgrind
        # tests/gates/trunk_check.py checks XXH3 with the library, not k3's copy
        /usr/bin/python3 -c 'import ctypes; ctypes.CDLL("libxxhash.so.0")' 2>/dev/null ||
            echo libxxhash0
        has ps || echo procps
        has pkg-config || echo pkgconf
        has cmake || echo cmake
        /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || echo python3-torch
        /usr/bin/python3 -c 'import PIL' >/dev/null 2>&1 || echo python3-pil
        # gates 51-54: the independent JSON Schema validator of the grammar tests
        /usr/bin/python3 -c 'import jsonschema' >/dev/null 2>&1 || echo python3-jsonschema
        has qemu-aarch64 || echo qemu-user
        # the cross compiler alone has no libc: no <stdio.h>, no libc.a
        has aarch64-linux-gnu-gcc || echo gcc-aarch64-linux-gnu
        builds aarch64-linux-gnu-gcc -static || echo libc6-dev-arm64-cross
        if has qemu-aarch64 && [ -x "$tmp/t.aarch64-linux-gnu-gcc" ] &&
            ! runs qemu-aarch64 "$tmp/t.aarch64-linux-gnu-gcc"; then
            echo "k3: qemu-aarch64 cannot run a static aarch64 program" >&2
            echo qemu-user
        fi
    fi
    if [ "$what" = plots ]; then
        has gnuplot || echo gnuplot-nox
    fi
    if [ "$what" = windows ]; then
        has curl || echo curl
        has x86_64-w64-mingw32-gcc || echo gcc-mingw-w64-x86-64
        has wine64 || [ -x /usr/lib/wine/wine64 ] || echo wine64
    fi
}

pkgs=$(missing | sort -u | tr '\n' ' ')
if [ -n "$pkgs" ]; then
    echo "k3: installing missing packages: $pkgs"
    if ! has apt-get; then
        echo "k3: no apt-get here; install: $pkgs" >&2
        exit 1
    fi
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    start=$(date +%s)
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $pkgs
    echo "k3: deps: installed in $(($(date +%s) - start)) s"
    still=$(missing | sort -u | tr '\n' ' ')
    if [ -n "$still" ]; then
        echo "k3: still missing after the install: $still" >&2
        exit 1
    fi
fi
# npm ls fails when a pinned package is missing or at another version.
if [ "$what" = test ] && [ -f package-lock.json ] && ! npm ls >/dev/null 2>&1; then
    echo "k3: installing the pinned npm packages (npm ci)"
    start=$(date +%s)
    npm ci --no-audit --no-fund --loglevel=error
    echo "k3: deps: npm ci in $(($(date +%s) - start)) s"
fi
exit 0
