/* constrain_opts.c - see constrain_opts.h. */
#include "cli/constrain_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/file.h"
#include "util/xxh64.h"

/* Largest grammar or schema file read. */
#define MAX_GRAMMAR_FILE ((size_t)16 << 20)

/* The option given: its file and kind (NULL when neither). */
static const char *given(const k3_options *o, k3_constrain_kind *kind)
{
    *kind = o->grammar_file ? K3_CONSTRAIN_GBNF : K3_CONSTRAIN_JSON_SCHEMA;
    return o->grammar_file ? o->grammar_file : o->json_schema_file;
}

int k3_cli_constrain_text(const k3_constrain_vocab *v, k3_constrain_kind kind, const char *text,
                          size_t len, const char *where, k3_constrain **cons, k3_err *e)
{
    k3_err why = { 0, "" };
    *cons = NULL;
    if (k3_constrain_new(v, kind, text, len, 1, cons, NULL, &why))
        return k3_fail(e, why.code, "%s: %s", where, why.msg);
    return K3_OK;
}

int k3_cli_constrain(const k3_options *o, const k3_tokenizer *tok, size_t vocab,
                     k3_constrain_vocab **v, k3_constrain **cons, k3_err *e)
{
    k3_constrain_kind kind;
    const char *path = given(o, &kind);
    size_t len = 0;
    *v = NULL;
    *cons = NULL;
    if (!path)
        return K3_OK;
    if (!tok)
        return k3_fail(e, K3_EINPUT, "%s matches text: it needs a tokenizer (--tok DIR, or a "
                                     "MODEL_DIR holding tiktoken.model)",
                       o->grammar_file ? "--grammar" : "--json-schema");
    char *text = k3_read_small_file(e, path, MAX_GRAMMAR_FILE, &len);
    if (!text)
        return e->code;
    if (k3_constrain_vocab_new(tok, vocab, v, e) == K3_OK)
        k3_cli_constrain_text(*v, kind, text, len, path, cons, e);
    free(text);
    return e->code;
}

/* The hash naming the grammar or schema file's kind and bytes. */
static int grammar_hash(const k3_options *o, uint64_t *h, k3_err *e)
{
    k3_constrain_kind kind;
    const char *path = given(o, &kind);
    size_t len = 0;
    char *text = k3_read_small_file(e, path, MAX_GRAMMAR_FILE, &len);
    if (!text)
        return e->code;
    *h = k3_xxh64(text, len, (uint64_t)kind + 1);
    free(text);
    return K3_OK;
}

/* FILE.grammar for the state file path. */
static int sidecar(const char *state, char *out, size_t cap, k3_err *e)
{
    if ((size_t)snprintf(out, cap, "%s.grammar", state) >= cap)
        return k3_fail(e, K3_EINPUT, "%s: path too long", state);
    return K3_OK;
}

int k3_cli_constrain_save(const k3_options *o, size_t start, k3_err *e)
{
    k3_constrain_kind kind;
    char path[4096];
    uint64_t h = 0;
    k3_atomic_file a;
    if (!given(o, &kind) || !o->save_state)
        return K3_OK;
    if (sidecar(o->save_state, path, sizeof path, e) || grammar_hash(o, &h, e) ||
        k3_atomic_begin(&a, path, e))
        return e->code;
    fprintf(a.f, "k3-grammar-state 1\nhash %016llx\nstart %zu\n", (unsigned long long)h, start);
    return k3_atomic_commit(&a, e);
}

int k3_cli_constrain_resume(const k3_options *o, const k3_state *s, size_t np,
                            k3_constrain *cons, size_t *from, k3_err *e)
{
    char path[4096];
    unsigned long long want = 0;
    size_t start = 0;
    uint64_t h = 0;
    *from = (size_t)k3_state_pos(s);
    if (!cons || !o->load_state || np > 0 || sidecar(o->load_state, path, sizeof path, e))
        return e->code;
    FILE *f = fopen(path, "rb");
    if (!f)
        return K3_OK; /* saved without a grammar: the constrained text starts here */
    int ok = fscanf(f, "k3-grammar-state 1\nhash %16llx\nstart %zu\n", &want, &start) == 2;
    fclose(f);
    if (!ok)
        return k3_fail(e, K3_EINPUT, "%s: not a k3 grammar state file", path);
    if (grammar_hash(o, &h, e))
        return e->code;
    if (h != want)
        return k3_fail(e, K3_EINPUT, "%s: the state was saved under another %s: continue it "
                                     "with the same file", path,
                       o->grammar_file ? "grammar" : "schema");
    size_t pos = (size_t)k3_state_pos(s);
    if (start > pos)
        return k3_fail(e, K3_EINPUT, "%s: starts at %zu, past the state's %zu ids", path, start,
                       pos);
    k3_err why = { 0, "" };
    if (k3_constrain_replay(cons, k3_state_ids(s) + start, pos - start, &why))
        return k3_fail(e, K3_EINPUT, "%s: the saved text does not continue under the grammar: "
                                     "%s", o->load_state, why.msg);
    *from = start;
    return K3_OK;
}
