# 07-library: libk3 as a user links it. `make install PREFIX=...` into a
# scratch prefix; examples/generate.c is built against the installed files
# only (pkg-config k3), once with the shared library (its soname recorded,
# found at run time through the rpath k3.pc records: the gate runs it with
# LD_LIBRARY_PATH unset) and once statically (pkg-config --static); both
# print exactly what `k3 MODEL --ignore-eos --show-special` prints for the
# prompt. examples/chat.c (k3/turn.h: one chat turn, the release's end
# rules, the reply read back) prints the reasoning and content
# `k3 MODEL --chat --effort low --show-thinking` prints for the same message.
# Then the CMake way: the library built and installed by CMake, and
# examples/CMakeLists.txt (find_package(k3)) building the same program.
# ladder: check
# (make check and CI only, not make test: install + the PIC library + CMake: a second full build)
. tests/gates/lib.sh
tok=${K3_RELEASE_DIR:-../shared/k3-release} # the release files beside the clone
[ -f "$tok/tiktoken.model" ] || die "no release tokenizer at $tok"
command -v pkg-config >/dev/null || die "pkg-config is needed (deps.sh installs pkgconf)"
work="$K3_BUILD/library"
rm -rf "$work"
mkdir -p "$work"
prefix=$(cd "$work" && pwd)/prefix
make -s BUILD="$K3_BUILD" PREFIX="$prefix" install >"$work/install.log" 2>&1 ||
    die "make install failed: $(tail -5 "$work/install.log")"
for f in bin/k3 lib/libk3.a lib/libk3.so lib/libk3.so.0 lib/pkgconfig/k3.pc include/k3/k3.h \
    share/k3/examples/generate.c share/k3/examples/chat.c; do
    [ -e "$prefix/$f" ] || die "make install did not install $f"
done
# exports SO: the shared library (linked with k3.map)'s defined dynamic symbols are exactly the
# functions the installed headers declare, which are exactly k3.map's list.
exports() {
    nm -D --defined-only "$1" >"$work/nm.txt" || die "nm -D $1 failed"
    inc="$prefix/include/k3"
    "$PYTHON" - "$work/nm.txt" "$inc" k3.map "$1" <<'EOF' || die "$1: exported symbols"
import glob, re, sys
def decl(path):
    s = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    s = re.sub(r"#define[^\n]*(\\\n[^\n]*)*", "", s)
    return set(re.findall(r"\b(k3_\w+)\s*\(", s))
public = set().union(*(decl(h) for h in glob.glob(sys.argv[2] + "/*.h")))
listed = set(re.findall(r"^\s+(k3_\w+);", open(sys.argv[3]).read(), re.M))
assert listed == public, "k3.map and include/k3 differ: map only %s, headers only %s" % (
    sorted(listed - public), sorted(public - listed))
syms = set()
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3 and f[1] != "A":
        syms.add(f[2].split("@")[0])
assert syms == public, "exported but not public: %s; public but not exported: %s" % (
    sorted(syms - public)[:10], sorted(public - syms))
print("ok: %s exports the %d public functions and nothing else" % (sys.argv[4], len(syms)))
EOF
}
exports "$prefix/lib/libk3.so"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion k3)" = 0.1.0 ] || die "k3.pc: version $(pkg-config --modversion k3)"
src="$prefix/share/k3/examples/generate.c"
# shellcheck disable=SC2046
${CC:-cc} -std=c99 -Wall -Wextra -Werror "$src" $(pkg-config --cflags --libs k3) \
    -o "$work/gen-shared" || die "the example does not build against the shared library"
objdump -p "$work/gen-shared" | grep -q 'NEEDED *libk3.so.0' ||
    die "gen-shared does not need libk3.so.0"
# shellcheck disable=SC2046
static_libs=$(pkg-config --static --libs-only-other --libs-only-l k3 | sed 's/-lk3//')
# shellcheck disable=SC2086
${CC:-cc} -std=c99 -Wall -Wextra -Werror "$src" $(pkg-config --cflags k3) -L"$prefix/lib" \
    -Wl,-Bstatic -lk3 -Wl,-Bdynamic $static_libs -o "$work/gen-static" ||
    die "the example does not build against the static library"
! objdump -p "$work/gen-static" | grep -q 'NEEDED *libk3' || die "gen-static needs libk3.so"
dir=$(model chat-tiny tiny-a --vocab 163840)
prompt="The capital of France is"
"$K3_BIN" "$dir" --tok "$tok" --prompt "$prompt" --gen 8 --ignore-eos --show-special --quiet \
    >"$work/want" || die "k3 failed"
env -u LD_LIBRARY_PATH "$work/gen-shared" "$dir" "$tok" "$prompt" 8 \
    >"$work/got-shared" || die "gen-shared failed (without LD_LIBRARY_PATH: no rpath?)"
"$work/gen-static" "$dir" "$tok" "$prompt" 8 >"$work/got-static" || die "gen-static failed"
cmp -s "$work/want" "$work/got-shared" || die "the shared-library example printed other text"
cmp -s "$work/want" "$work/got-static" || die "the static-library example printed other text"
echo "ok: installed libk3 (shared and static) runs examples/generate.c to k3's own text"

# The chat turn: examples/chat.c against the shared library (run without
# LD_LIBRARY_PATH too) gives k3 --chat's reasoning and content.
# shellcheck disable=SC2046
${CC:-cc} -std=c99 -Wall -Wextra -Werror "$prefix/share/k3/examples/chat.c" \
    $(pkg-config --cflags --libs k3) -o "$work/chat-shared" ||
    die "examples/chat.c does not build against the shared library"
msg="What is the capital of France?"
printf '%s\n' "$msg" | "$K3_BIN" "$dir" --tok "$tok" --chat --effort low --gen 24 --show-thinking --quiet \
    >"$work/chat-want" || die "k3 --chat failed"
env -u LD_LIBRARY_PATH "$work/chat-shared" "$dir" "$tok" "$msg" 24 >"$work/chat-out" \
    2>"$work/chat-err" || die "examples/chat.c failed: $(cat "$work/chat-err")"
"$PYTHON" - "$work/chat-want" "$work/chat-out" "$work/chat-err" <<'EOF'
import sys
want = open(sys.argv[1], "rb").read()
content = open(sys.argv[2], "rb").read()
err = open(sys.argv[3], "rb").read()
reasoning, summary = err[:-1].rsplit(b"\n", 1)  # the summary is the last line
assert b"24 generated, finish_reason length" in summary, summary
assert reasoning, "no reasoning from a thinking turn"
got = reasoning + b"\n" + content
assert got == want, "examples/chat.c: %r\nk3 --chat: %r" % (got[:200], want[:200])
print("ok: examples/chat.c (k3_chat_turn) = k3 --chat, %d bytes of thinking" % len(reasoning))
EOF

command -v cmake >/dev/null || die "cmake is needed (deps.sh installs it)"
cmake -S . -B "$work/cmake" -DCMAKE_INSTALL_PREFIX="$prefix-cmake" >"$work/cmake.log" 2>&1 &&
    cmake --build "$work/cmake" -j2 --target k3_lib k3_shared k3 >>"$work/cmake.log" 2>&1 &&
    cmake --install "$work/cmake" >>"$work/cmake.log" 2>&1 ||
    die "the CMake build or install failed: $(tail -5 "$work/cmake.log")"
exports "$prefix-cmake/lib/libk3.so"
cmake -S examples -B "$work/cmake-example" -DCMAKE_PREFIX_PATH="$prefix-cmake" \
    >>"$work/cmake.log" 2>&1 && cmake --build "$work/cmake-example" >>"$work/cmake.log" 2>&1 ||
    die "find_package(k3) and the example failed: $(tail -5 "$work/cmake.log")"
"$work/cmake-example/generate" "$dir" "$tok" "$prompt" 8 >"$work/got-cmake" ||
    die "the CMake example failed"
cmp -s "$work/want" "$work/got-cmake" || die "the CMake example printed other text"
echo "ok: find_package(k3) from a CMake install builds the example to the same text"
