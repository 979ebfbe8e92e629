# 03-include-graph: the folders of src/ form no include cycle. An edge A -> B
# is a file in src/A that includes "B/file.h" (a header of src/B); the public
# headers include/k3/*.h are a leaf and may include no src/ header. Prints the
# graph; fails naming every cycle and the files that make its edges. A quoted
# include that names no existing header also fails (the graph would be
# incomplete). Some edges are refused outright, cycle or not (REFUSED below):
# residency (resid/) and reads and formats (io/) know dimensions and byte
# ranges, never the model (model/ includes them, not the reverse); and only
# cli/ may include pack/ (the offline packer, not in libk3.a), nothing cli/.
# K3_GRAPH_ROOT (default .) is the tree to check, so the gate can be shown
# to fail on a scratch copy.
. tests/gates/lib.sh
"$PYTHON" - "${K3_GRAPH_ROOT:-.}" <<'EOF'
import os, re, sys

INC = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SRC, PUB = os.path.join(sys.argv[1], "src"), os.path.join(sys.argv[1], "include")
# (from, to): why the edge may not exist. "*" as from is every other folder.
REFUSED = {
    ("resid", "model"): "residency takes dimensions and byte ranges, not the model",
    ("io", "model"): "io/ is reads and formats; it knows no model",
    ("io", "resid"): "io/ is below residency (resid/ reads through io/)",
    ("*", "pack"): "the trunk packer links into bin/k3 only; only cli/ may use it",
    ("*", "cli"): "cli/ is the program; nothing includes it",
}
ALLOWED = {("cli", "pack")}
areas = sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))
edges = {a: {} for a in areas}  # edges[A][B] = files of A that include a B header
bad = []
nfiles = 0


def scan(path):
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            m = INC.match(line)
            if m:
                yield no, m.group(1)


for a in areas:
    for root, _, names in os.walk(os.path.join(SRC, a)):
        for n in sorted(names):
            if not n.endswith((".c", ".h")):
                continue
            path = os.path.join(root, n)
            nfiles += 1
            for no, inc in scan(path):
                head = inc.split("/")[0]
                if "/" not in inc:
                    target = None if os.path.isfile(os.path.join(root, inc)) else "?"
                elif os.path.isfile(os.path.join(SRC, inc)):
                    target = head
                elif head == "k3" and os.path.isfile(os.path.join(PUB, inc)):
                    target = "k3"
                else:
                    target = "?"
                if target == "?":
                    bad.append("%s:%d: #include \"%s\" names no header" % (path, no, inc))
                elif target and target != a:
                    edges[a].setdefault(target, set()).add(path)

for n in sorted(os.listdir(os.path.join(PUB, "k3"))):
    path = os.path.join(PUB, "k3", n)
    nfiles += 1
    for no, inc in scan(path):
        if not (inc.startswith("k3/") and os.path.isfile(os.path.join(PUB, inc))):
            bad.append("%s:%d: public header includes \"%s\" (k3/ must be a leaf)"
                       % (path, no, inc))

print("include graph of src/ (%d files):" % nfiles)
for a in areas:
    print("  %-10s -> %s" % (a, " ".join(sorted(edges[a])) or "(nothing)"))

# Strongly connected components (Tarjan); any with two or more folders holds
# a cycle, of which one is named by a path search inside the component.
index, low, stack, on, sccs = {}, {}, [], set(), []


def strong(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in sorted(edges.get(v, {})):
        if w not in index:
            strong(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        sccs.append(sorted(comp))


for a in areas:
    if a not in index:
        strong(a)


def cycle_in(comp):
    """A shortest cycle through comp[0] inside the component (BFS)."""
    start, inside = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    for v in queue:
        for w in sorted(edges.get(v, {})):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in inside and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


refused = []
for a in areas:
    for b in sorted(edges[a]):
        why = REFUSED.get((a, b)) or REFUSED.get(("*", b))
        if why and (a, b) not in ALLOWED:
            refused.append((a, b, why))

cycles = [c for c in sccs if len(c) > 1]
for comp in cycles:
    cyc = cycle_in(comp)
    print("CYCLE: %s (component: %s)" % (" -> ".join(cyc), " ".join(comp)), file=sys.stderr)
    for x, y in zip(cyc, cyc[1:]):
        print("  %s -> %s: %s" % (x, y, " ".join(sorted(edges[x][y]))), file=sys.stderr)
for a, b, why in refused:
    print("REFUSED EDGE: %s -> %s (%s): %s" % (a, b, why, " ".join(sorted(edges[a][b]))),
          file=sys.stderr)
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
if cycles or bad or refused:
    sys.exit(1)
print("ok: %d folders, no include cycle, no refused edge" % len(areas))
EOF
