# 04-style: the house rules a reader relies on, checked on the source text.
#   1. No line is wider than 100 columns (characters, tabs to 8) in the C of
#      src/, include/, tests/unit/, tests/progs/ and tests/fuzz/*.c.
#   2. Every quoted include in src/ names its folder: "area/file.h" relative
#      to src/, or "k3/file.h" for a public header.
#   3. Nothing in src/, include/, tools/ or tests/ cites SPEC as a document
#      (SPEC.md, SPEC section N, SPEC §N, SPEC N, "in SPEC", "SPEC says"): the model is
#      described in docs/MODEL.md, which is what comments cite. Names such as
#      AF_UNSPEC, K3_TOK_NSPECIAL or a K3_FAULT "SPEC" argument are not
#      citations.
# Fails naming every offending file:line. K3_STYLE_ROOT (default .) is the
# tree to check, so the gate can be shown to fail on a scratch copy.
. tests/gates/lib.sh
"$PYTHON" - "${K3_STYLE_ROOT:-.}" <<'EOF'
import os, re, sys

root = sys.argv[1]
SELF = os.path.join("tests", "gates", "04-style.sh")
WIDTH = 100
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]*)"')
CITE = re.compile(r"\bSPEC(?:\.md\b|\s*§|\s+(?:section|sect\.|chapter|says)\b|\s+\d|'s\b)"
                  r"|\b(?:in|from|see|per|by|of|the) SPEC\b(?![_=])"
                  r"|\(SPEC\b|\b(?i:spec\.md)\b")
NOT_CITE = re.compile(r"SPEC (?:ARGS|KIND)|=SPEC\b")
bad = []


def files(top, exts, recurse=True):
    top_abs = os.path.join(root, top)
    if not os.path.isdir(top_abs):
        return
    for d, subs, names in os.walk(top_abs):
        subs[:] = sorted(s for s in subs if s not in ("node_modules", "__pycache__"))
        for n in sorted(names):
            if exts is None or n.endswith(exts):
                yield os.path.relpath(os.path.join(d, n), root)
        if not recurse:
            return


def lines(rel):
    with open(os.path.join(root, rel), "rb") as f:
        data = f.read()
    if b"\0" in data:
        return []
    return data.decode("utf-8", errors="replace").split("\n")


C = (".c", ".h")
wide = [f for t in ("src", "include", "tests/unit", "tests/progs") for f in files(t, C)]
wide += list(files("tests/fuzz", (".c",), recurse=False))
for rel in wide:
    for no, line in enumerate(lines(rel), 1):
        w = len(line.rstrip("\r").expandtabs(8))
        if w > WIDTH:
            bad.append(f"{rel}:{no}: {w} columns (at most {WIDTH})")

for rel in files("src", C):
    for no, line in enumerate(lines(rel), 1):
        m = INCLUDE.match(line)
        if m and "/" not in m.group(1):
            bad.append(f'{rel}:{no}: #include "{m.group(1)}" names no folder '
                       f'(write "area/{m.group(1)}", relative to src/)')

nscan = 0
for t in ("src", "include", "tools", "tests"):
    for rel in files(t, None):
        if rel == SELF or "/regressions/" in rel or "/fixtures/" in rel:
            continue
        nscan += 1
        for no, line in enumerate(lines(rel), 1):
            for m in CITE.finditer(line):
                if not NOT_CITE.search(line[max(0, m.start() - 1):m.end() + 6]):
                    bad.append(f"{rel}:{no}: cites SPEC ({m.group(0)!r}): cite docs/MODEL.md")
                    break

if len(wide) < 50 or nscan < 100:
    sys.exit(f"FAIL: only {len(wide)} C files and {nscan} files found under {root}: wrong root?")
for b in bad:
    print(b)
if bad:
    sys.exit(f"FAIL: {len(bad)} style problem(s)")
print(f"ok: {len(wide)} C files within {WIDTH} columns, src/ includes name their folder, "
      f"no SPEC citation in {nscan} files")
EOF
