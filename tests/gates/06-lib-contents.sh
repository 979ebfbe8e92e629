# 06-lib-contents: libk3.a is the engine, not the programs built on it. No
# function that a header of src/pack (the offline trunk packer) or src/cli
# (the k3 program) declares, and never the packer's entry point
# k3_trunk_pack, may be defined in the archive (nm: a global symbol of any
# type but U). The names come from the headers, so the check holds for any
# build that made the archive (make, CMake). Positive control: bin/k3 must
# define k3_trunk_pack, so a name list that matches nothing cannot pass.
# Prints how many names were checked and the archive's defined-symbol count.
# K3_LIB (default $K3_BUILD/libk3.a) is the archive to check, so the gate can
# be shown to fail on an archive built with the packer put back.
. tests/gates/lib.sh
lib=${K3_LIB:-$K3_BUILD/libk3.a}
[ -f "$lib" ] || die "$lib: no such archive (build it first)"
[ -f "$K3_BIN" ] || die "$K3_BIN: no such program (build it first)"
nm -g --defined-only "$lib" >"$K3_BUILD/lib-contents.nm"
nm -g --defined-only "$K3_BIN" >"$K3_BUILD/bin-contents.nm"
"$PYTHON" - "$lib" "$K3_BUILD/lib-contents.nm" "$K3_BIN" "$K3_BUILD/bin-contents.nm" <<'EOF'
import glob, re, sys

lib, lib_nm, prog, prog_nm = sys.argv[1:5]
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# A declaration starts in column 0: a return type, then the name and "(".
DECL = re.compile(r"^[A-Za-z_][A-Za-z0-9_ \t*]*?\b(k3_[A-Za-z0-9_]+)\s*\(", re.M)

names = {"k3_trunk_pack"}
for h in sorted(glob.glob("src/pack/*.h") + glob.glob("src/cli/*.h")):
    with open(h, encoding="utf-8") as f:
        names.update(DECL.findall(COMMENT.sub(" ", f.read())))


def defined(path):
    """Global symbols defined in nm output, by name: the members (archives)."""
    out, member = {}, prog
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.endswith(":"):
                member = line[:-1]
                continue
            parts = line.split()
            if len(parts) >= 2 and parts[-2] != "U":
                out.setdefault(parts[-1], []).append(member)
    return out


in_lib, in_prog = defined(lib_nm), defined(prog_nm)
if "k3_trunk_pack" not in in_prog:
    print("FAIL: %s defines no k3_trunk_pack: the check would see nothing" % prog,
          file=sys.stderr)
    sys.exit(1)
bad = sorted(n for n in names if n in in_lib)
for n in bad:
    print("FAIL: %s defines %s (in %s): program code in the library"
          % (lib, n, " ".join(in_lib[n])), file=sys.stderr)
if bad:
    sys.exit(1)
print("ok: %s defines none of %d packer and CLI functions (%d global symbols defined);"
      " %s defines k3_trunk_pack" % (lib, len(names), len(in_lib), prog))
EOF
