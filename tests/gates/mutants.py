#!/usr/bin/python3
"""mutants.py - deliberate corruptions of the engine, for 50-mutants.sh.

  mutants.py list                 names of the mutants
  mutants.py copy SRC DST         copy what bin/k3's build reads from SRC to DST
  mutants.py apply NAME SRC DST   write NAME's files into DST: SRC's text, mutated
  mutants.py restore NAME SRC DST write NAME's files into DST: SRC's text as is

One copy serves every mutant in turn (apply, build, run, restore): make
then recompiles only the mutated files, not the whole engine per mutant.

Each mutant is a list of exact (file, old, new) replacements. If an `old`
text is no longer in the source the mutant cannot be applied and this exits
1: a mutation test that silently stops mutating would prove nothing.
"""
import os
import re
import shutil
import sys

DECAY = """    for (size_t c = 0; c < d; c++)
        for (size_t j = 0; j < d; j++)
            S[c * d + j] *= alpha[c];
"""

MUTANTS = {
    # MXFP4: the even element taken from the HIGH nibble instead of the low.
    "swapped-nibbles": [
        ("src/core/kernels.c",
         "(i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15)",
         "(i & 1) ? (uint8_t)(byte & 15) : (uint8_t)(byte >> 4)"),
    ],
    # Router: the selection bias leaks into the mixing weights.
    "bias-in-weights": [
        ("src/model/moe.c", "sum += sig[ids[j]];", "sum += sig[ids[j]] + bias[ids[j]];"),
        ("src/model/moe.c", "weights[j] = renormalize ? sig[ids[j]] / (sum + 1e-20f) * scaling",
         "weights[j] = renormalize ? (sig[ids[j]] + bias[ids[j]]) / (sum + 1e-20f) * scaling"),
    ],
    # The latent norm applied to each expert's output instead of the sum.
    "per-expert-norm": [
        ("src/model/moe.c", "static int routed(const k3_config *c, const k3_expert_source *src,",
         "static int routed(const k3_config *c, const float *latent_norm, const k3_expert_source *src,"),
        ("src/model/moe.c", "rc = routed(c, src, b.ids,",
         "rc = routed(c, w->latent_norm, src, b.ids,"),
        ("src/model/moe.c", "k3_matmul(&ex->w2, h, m, o, mm);",
         "k3_matmul(&ex->w2, h, m, o, mm);\n            for (size_t r = 0; r < m; r++)\n                k3_rmsnorm(o + r * Z, o + r * Z, latent_norm, Z, (float)c->rms_norm_eps);"),
        ("src/model/moe.c", "k3_rmsnorm(b.y + t * Z, b.y + t * Z, w->latent_norm, Z, (float)c->rms_norm_eps);",
         "(void)b.y;"),
    ],
    # AttnRes skipped: every mix just passes the newest source through.
    "skipped-attnres": [
        ("src/model/attnres.c", "k3_axpy(out, score[s], src[s], H);",
         "k3_axpy(out, s + 1 == n, src[s], H);"),
    ],
    # MLA: the shared rope part of the keys dropped from the scores.
    "dropped-rope": [
        ("src/model/mla.c", "(k3_dot(qabs, kv, R) + k3_dot(qr, kv + R, DR)) * scale",
         "k3_dot(qabs, kv, R) * scale"),
    ],
    # KDA: the decay applied after the delta update instead of before.
    "decay-after-delta": [
        ("src/model/kda.c", DECAY + "    /* u = S^T k", "    /* u = S^T k"),
        ("src/model/kda.c", "    memset(o, 0, d * sizeof *o);",
         DECAY + "    memset(o, 0, d * sizeof *o);"),
    ],
}


def copy(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    # What the Makefile's bin/k3 rule reads: the sources, the public headers,
    # the embedding script (the chat page is compiled in) and VERSION.
    for part in ("src", "include", "scripts"):
        shutil.copytree(f"{src}/{part}", f"{dst}/{part}")
    for top in ("Makefile", "VERSION"):
        shutil.copy(f"{src}/{top}", dst)
    # Makefile fragments it includes (not the generated .d files).
    for inc in re.findall(r"^include\s+(\S+)", open(f"{src}/Makefile").read(), re.M):
        os.makedirs(os.path.dirname(f"{dst}/{inc}") or dst, exist_ok=True)
        shutil.copy(f"{src}/{inc}", f"{dst}/{inc}")


def write(name, src, dst, mutate):
    """Rewrites NAME's files in DST from SRC's text, mutated or not. The
    files are written anew either way, so their mtime tells make to
    recompile them."""
    texts = {}
    for path, _, _ in MUTANTS[name]:
        texts[path] = open(f"{src}/{path}").read()
    if mutate:
        for path, old, new in MUTANTS[name]:
            if texts[path].count(old) < 1:
                sys.exit(f"mutant {name}: '{old[:60]}' not found in {path}; update tests/gates/mutants.py")
            texts[path] = texts[path].replace(old, new)
    for path, text in texts.items():
        open(f"{dst}/{path}", "w").write(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["list"]:
        print("\n".join(MUTANTS))
    elif sys.argv[1:2] == ["copy"] and len(sys.argv) == 4:
        copy(*sys.argv[2:4])
    elif sys.argv[1:2] in (["apply"], ["restore"]) and len(sys.argv) == 5:
        write(*sys.argv[2:5], sys.argv[1] == "apply")
    else:
        sys.exit(__doc__)
