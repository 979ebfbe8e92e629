#!/bin/sh
# embed.sh NAME FILE: prints C source defining the bytes of FILE as
#   const unsigned char NAME[]  (NUL-terminated) and  const size_t NAME_len
# for build steps that compile a file into the binary (the chat page,
# src/server/webui.h). POSIX od and sed only, so every build host has them
# (Debian, MSYS2, a cross build's host).
set -eu
[ $# -eq 2 ] || {
    echo "usage: sh scripts/embed.sh NAME FILE" >&2
    exit 2
}
name=$1
file=$2
[ -r "$file" ] || {
    echo "embed.sh: cannot read $file" >&2
    exit 1
}
echo "/* generated from $file by scripts/embed.sh: do not edit */"
echo '#include "server/webui.h"'
echo "const unsigned char ${name}[] = {"
od -An -v -tx1 "$file" | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e '/^$/d'
echo "0x00};"
echo "const size_t ${name}_len = sizeof ${name} - 1;"
