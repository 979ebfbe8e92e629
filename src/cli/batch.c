/* batch.c - see batch.h.
 *
 * Each line becomes a sequence with its own state, sampler, drafter and
 * turn (chat/turn.h, its decode loop driven step by step). A round is one
 * k3_forward_multi call: every sequence that is decoding feeds its pending
 * id and, when its cost gate says drafting pays (--spec, auto by default;
 * the ngram drafter), the drafts to verify after it; the sequences still
 * in their prompts share what is left of K3_PREFILL_CHUNK rows, in input
 * order (a long prompt takes at most a chunk a round, so it never holds
 * the decodes back for longer). A sequence whose prompt is in begins its
 * turn (its first id drawn); after each round every decoding sequence
 * takes its rows (k3_turn_decode_took: each sampled as a plain run would,
 * drafts kept while they match, the rest rolled back) and, unless its
 * turn ends, has its next id pending. A draw depends only on the line's
 * seed and the position (k3/sample.h), and a row's bits only on its own
 * sequence (k3_forward_multi), so each sequence's ids are those of
 * running it alone with `--prompt` or `--ids` and the same options,
 * with or without drafts. */
#include "cli/batch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jtext.h"
#include "chat/turn.h"
#include "cli/constrain_opts.h"
#include "cli/generate.h"
#include "gen/draft.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/json_write.h"
#include "util/os.h"

/* Lines in a batch file, and ids in one line's "ids". */
#define MAX_LINES 4096

/* One line of the batch file and its sequence. Lives at one address from
 * k3_turn_begin to k3_turn_finish (turn points into itself). */
typedef struct seqline {
    size_t lineno;
    uint32_t *prompt;    /* [np] */
    size_t np;
    const char *text;    /* "prompt": its text (in the parsed document) or NULL for "ids" */
    size_t text_len;
    long gen;            /* ids to generate */
    double temperature, top_p;
    long top_k;
    unsigned long long seed;
    int has_temperature, has_top_p, has_top_k, has_seed;
    k3_state *st;
    k3_sampler smp;
    int have_smp;
    k3_drafter drafter;  /* --spec: this line's ngram drafter (its own state) */
    int have_drafter;
    k3_turn_params tp;
    k3_turn_sink sink;
    k3_turn turn;
    int begun, done;     /* the turn began; it ended (res holds why) */
    k3_turn_result res;
    size_t fed;          /* prompt ids fed so far */
    float *logits;       /* [vocab] the prompt's last logits */
    uint32_t *out_ids;   /* [gen + 1] the ids generated */
    size_t ngen;
    k3_buf shown;        /* the text shown (tokenizer lines) */
    /* "grammar" (GBNF) or "json_schema": the line's own constraint text (in the
     * parsed document, or the schema's JSON written out), else --grammar /
     * --json-schema's */
    const char *gtext;
    size_t gtext_len;
    k3_constrain_kind gkind;
    k3_buf schema;       /* "json_schema" given as an object: its JSON text */
    k3_constrain *cons;
} seqline;

typedef struct batch {
    const k3_options *o;
    const char *path;
    seqline *L;
    size_t n;
    k3_json_doc **docs; /* [n] each line's parsed document (prompt text points into it) */
    k3_constrain_vocab *gv; /* the vocabulary the lines' grammars match (any given) */
    char *gfile;        /* --grammar / --json-schema's text */
    size_t gfile_len;
} batch;

static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    seqline *q = ctx;
    (void)channel;
    return k3_buf_put(&q->shown, s, n, e);
}

static int on_token(void *ctx, uint32_t id, const float *logits, int is_end, int *stop,
                    k3_err *e)
{
    seqline *q = ctx;
    (void)logits, (void)is_end, (void)stop, (void)e;
    q->out_ids[q->ngen++] = id;
    return K3_OK;
}

/* A non-negative JSON integer at most max, or -1. */
static long long json_uint(const k3_json *v, long long max)
{
    return v->type == K3J_NUMBER && v->is_int && v->integer >= 0 && v->integer <= max
               ? (long long)v->integer
               : -1;
}

/* Parses one line's object into q (the document stays alive in *doc). */
static int parse_line(const batch *b, seqline *q, const char *line, size_t len,
                      k3_json_doc **doc, k3_err *e)
{
    char jerr[256];
    const char *path = b->path;
    size_t ln = q->lineno;
    *doc = k3_json_parse(line, len, jerr, sizeof jerr);
    if (!*doc)
        return k3_fail(e, K3_EINPUT, "%s:%zu: not JSON: %s", path, ln, jerr);
    const k3_json *r = k3_json_root(*doc);
    if (r->type != K3J_OBJECT)
        return k3_fail(e, K3_EINPUT, "%s:%zu: expected an object {\"prompt\": ...} or "
                       "{\"ids\": [...]}", path, ln);
    q->gen = b->o->gen;
    int have_ids = 0;
    for (size_t i = 0; i < r->count; i++) {
        const char *k = r->keys[i];
        const k3_json *v = &r->items[i];
        long long x;
        if (!strcmp(k, "prompt")) {
            if (v->type != K3J_STRING)
                return k3_fail(e, K3_EINPUT, "%s:%zu: \"prompt\" must be a string", path, ln);
            q->text = v->str;
            q->text_len = v->len;
        } else if (!strcmp(k, "ids")) {
            if (v->type != K3J_ARRAY || v->count == 0)
                return k3_fail(e, K3_EINPUT, "%s:%zu: \"ids\" must be a non-empty array of "
                               "token ids", path, ln);
            q->prompt = k3_malloc(e, v->count * sizeof *q->prompt, "batch ids");
            if (!q->prompt)
                return e->code;
            for (size_t j = 0; j < v->count; j++) {
                if ((x = json_uint(&v->items[j], 0xFFFFFFFFll)) < 0)
                    return k3_fail(e, K3_EINPUT, "%s:%zu: \"ids\" entry %zu is not a token id",
                                   path, ln, j + 1);
                q->prompt[j] = (uint32_t)x;
            }
            q->np = v->count;
            have_ids = 1;
        } else if (!strcmp(k, "gen")) {
            if ((x = json_uint(v, 1LL << 30)) < 0)
                return k3_fail(e, K3_EINPUT, "%s:%zu: \"gen\" must be an integer in [0, 2^30]",
                               path, ln);
            q->gen = (long)x;
        } else if (!strcmp(k, "top_k")) {
            if ((x = json_uint(v, 1LL << 30)) < 0)
                return k3_fail(e, K3_EINPUT, "%s:%zu: \"top_k\" must be an integer >= 0", path,
                               ln);
            q->top_k = (long)x;
            q->has_top_k = 1;
        } else if (!strcmp(k, "seed")) {
            if ((x = json_uint(v, INT64_MAX)) < 0)
                return k3_fail(e, K3_EINPUT, "%s:%zu: \"seed\" must be an integer >= 0", path,
                               ln);
            q->seed = (unsigned long long)x;
            q->has_seed = 1;
        } else if (!strcmp(k, "temperature") || !strcmp(k, "top_p")) {
            if (v->type != K3J_NUMBER)
                return k3_fail(e, K3_EINPUT, "%s:%zu: \"%s\" must be a number", path, ln, k);
            if (k[0] == 't' && k[1] == 'e') {
                q->temperature = v->number;
                q->has_temperature = 1;
            } else {
                q->top_p = v->number;
                q->has_top_p = 1;
            }
        } else if (!strcmp(k, "grammar") || !strcmp(k, "json_schema")) {
            if (q->gtext)
                return k3_fail(e, K3_EINPUT, "%s:%zu: give \"grammar\" or \"json_schema\", "
                               "not both", path, ln);
            q->gkind = k[0] == 'g' ? K3_CONSTRAIN_GBNF : K3_CONSTRAIN_JSON_SCHEMA;
            if (v->type == K3J_STRING) {
                q->gtext = v->str;
                q->gtext_len = v->len;
            } else if (q->gkind == K3_CONSTRAIN_JSON_SCHEMA && v->type == K3J_OBJECT) {
                if (k3_json_write(&q->schema, v, 0, e))
                    return e->code;
                q->gtext = q->schema.data;
                q->gtext_len = q->schema.len;
            } else {
                return k3_fail(e, K3_EINPUT, "%s:%zu: \"%s\" must be %s", path, ln, k,
                               q->gkind == K3_CONSTRAIN_GBNF
                                   ? "a string (GBNF)"
                                   : "an object (a JSON Schema) or its JSON text");
            }
        } else {
            return k3_fail(e, K3_EINPUT, "%s:%zu: unknown key \"%s\" (expected prompt or ids, "
                           "gen, temperature, top_p, top_k, seed, grammar, json_schema)", path,
                           ln, k);
        }
    }
    if ((q->text != NULL) == have_ids)
        return k3_fail(e, K3_EINPUT, "%s:%zu: give one of \"prompt\" and \"ids\"", path, ln);
    return K3_OK;
}

static int read_file(batch *b, k3_err *e)
{
    FILE *f = k3_fopen_input(b->path, e);
    if (!f)
        return e->code;
    char *line = NULL;
    size_t cap = 0, lineno = 0, lcap = 0;
    int64_t got;
    while (!e->code && (got = k3_os_getline(&line, &cap, f)) >= 0) {
        size_t len = (size_t)got;
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        if (b->n == MAX_LINES) {
            k3_fail(e, K3_EINPUT, "%s:%zu: more than %d lines", b->path, lineno, MAX_LINES);
            break;
        }
        if (b->n == lcap) {
            size_t nc = lcap ? 2 * lcap : 16;
            seqline *nl = realloc(b->L, nc * sizeof *nl);
            k3_json_doc **nd = nl ? realloc(b->docs, nc * sizeof *nd) : NULL;
            if (nl)
                b->L = nl;
            if (!nl || !nd) {
                k3_fail(e, K3_ERUNTIME, "out of memory reading %s", b->path);
                break;
            }
            b->docs = nd;
            lcap = nc;
        }
        seqline *q = &b->L[b->n];
        memset(q, 0, sizeof *q);
        q->lineno = lineno;
        b->docs[b->n++] = NULL;
        parse_line(b, q, line, len, &b->docs[b->n - 1], e);
    }
    if (!e->code && ferror(f))
        k3_fail(e, K3_ERUNTIME, "%s: read error: %s", b->path, strerror(errno));
    if (!e->code && b->n == 0)
        k3_fail(e, K3_EINPUT, "%s: no lines: expected one JSON object per line", b->path);
    free(line);
    fclose(f);
    return e->code;
}

/* The line's sampling fields over a sampler's parameters. */
static void line_fields(const seqline *q, k3_sampler *s)
{
    if (q->has_temperature)
        s->temperature = (float)q->temperature;
    if (q->has_top_p)
        s->top_p = (float)q->top_p;
    if (q->has_top_k)
        s->top_k = q->top_k > INT32_MAX ? INT32_MAX : (int)q->top_k;
    if (q->has_seed)
        s->seed = (uint64_t)q->seed;
}

/* The line's sampling parameters are valid (before the model is opened). */
static int check_sampling(const batch *b, const seqline *q, k3_err *e)
{
    const k3_sampling_opts *o = &b->o->sampling;
    k3_sampler s;
    memset(&s, 0, sizeof s);
    s.temperature = (float)o->temperature;
    s.top_p = (float)o->top_p;
    s.min_p = (float)o->min_p;
    s.repeat_penalty = (float)o->repeat_penalty;
    s.frequency_penalty = (float)o->frequency_penalty;
    s.presence_penalty = (float)o->presence_penalty;
    s.top_k = (int)o->top_k;
    line_fields(q, &s);
    k3_err why = { 0, "" };
    if (k3_sampler_check(&s, &why) != K3_OK)
        return k3_fail(e, K3_EINPUT, "%s:%zu: %s", b->path, q->lineno, why.msg);
    return K3_OK;
}

/* The line's sampler: the options', with the line's fields over them
 * (checked by check_sampling). */
static int line_sampler(const batch *b, seqline *q, size_t vocab, k3_err *e)
{
    if (k3_cli_sampler(&q->smp, b->o, vocab, e) != K3_OK)
        return e->code;
    q->have_smp = 1;
    line_fields(q, &q->smp);
    return K3_OK;
}

/* The line's constraint: its own "grammar" / "json_schema" (strict, as
 * --json-schema), else --grammar / --json-schema's, compiled before the
 * model is opened (a bad one is exit 2 naming the line). */
static int line_constraint(batch *b, seqline *q, const k3_tokenizer *tok, k3_err *e)
{
    const k3_options *o = b->o;
    char where[4200];
    if (!q->gtext && b->gfile) {
        q->gtext = b->gfile;
        q->gtext_len = b->gfile_len;
        q->gkind = o->grammar_file ? K3_CONSTRAIN_GBNF : K3_CONSTRAIN_JSON_SCHEMA;
    }
    if (!q->gtext)
        return K3_OK;
    if (!tok || !q->text)
        return k3_fail(e, K3_EINPUT, "%s:%zu: a grammar matches text: it needs a \"prompt\" "
                       "line and a tokenizer", b->path, q->lineno);
    if (!b->gv && k3_constrain_vocab_new(tok, k3_tok_vocab_size(tok), &b->gv, e))
        return e->code;
    snprintf(where, sizeof where, "%s:%zu", b->path, q->lineno);
    return k3_cli_constrain_text(b->gv, q->gkind, q->gtext, q->gtext_len, where, &q->cons, e);
}

/* Encodes the text prompts and checks every line against the options. */
static int prepare(batch *b, const k3_tokenizer *tok, k3_err *e)
{
    const k3_options *o = b->o;
    for (size_t i = 0; i < b->n && !e->code; i++) {
        seqline *q = &b->L[i];
        if (q->text) {
            if (!tok)
                return k3_fail(e, K3_EINPUT, "%s:%zu: a \"prompt\" needs a tokenizer (--tok DIR, "
                               "or a MODEL_DIR holding tiktoken.model)", b->path, q->lineno);
            if (k3_tok_encode(tok, q->text, q->text_len, o->prompt_special, &q->prompt, &q->np,
                              e) != K3_OK)
                return e->code;
            if (q->np == 0)
                return k3_fail(e, K3_EINPUT, "%s:%zu: the prompt is empty: there is nothing "
                               "to continue from", b->path, q->lineno);
        }
        if (check_sampling(b, q, e) != K3_OK || line_constraint(b, q, tok, e) != K3_OK)
            return e->code;
        long long total = (long long)q->np + q->gen;
        if (total > o->memory.max_context)
            return k3_fail(e, K3_EINPUT, "%s:%zu: %zu prompt tokens + gen %ld = %lld tokens "
                           "exceeds --max-context %ld", b->path, q->lineno, q->np, q->gen, total,
                           o->memory.max_context);
    }
    return e->code;
}

/* A sequence after a round it was in: its prompt just went in (begin its
 * turn: the first id drawn), or it was decoding (take its rows); the turn
 * is finished when it ends. */
static int advance(k3_model *m, seqline *q, k3_err *e)
{
    int done = 0;
    if (!q->begun) {
        if (k3_turn_begin(&q->turn, m, q->st, &q->tp, &q->sink, e) != K3_OK)
            return e->code;
        q->begun = 1;
        if (k3_turn_decode_begin(&q->turn, q->st, &q->smp, &done, e) != K3_OK)
            return e->code;
    } else if (k3_turn_decode_took(&q->turn, m, q->st, &done, e) != K3_OK) {
        return e->code;
    }
    if (done) {
        q->done = 1;
        return k3_turn_finish(&q->turn, &q->res, e);
    }
    return K3_OK;
}

/* One batched step's cost. */
typedef struct {
    double seconds;
    size_t rows, seqs;
    size_t verifying, prompting; /* of seqs: verifying drafts; feeding a prompt chunk */
    uint64_t bytes_read;
} round_cost;

static int write_report(FILE *f, const batch *b, const k3_model *m, const round_cost *rc,
                        size_t nr, double prefill_s, double wall, k3_err *e)
{
    const seqline *q0 = &b->L[0];
    k3_io_counters io;
    k3_model_io(m, &io);
    fprintf(f, "{\n  \"prompt_ids\": [");
    k3_cli_write_ids(f, q0->prompt, q0->np);
    fprintf(f, "],\n  \"generated_ids\": [");
    k3_cli_write_ids(f, q0->out_ids, q0->ngen);
    fprintf(f, "],\n  \"end\": \"%s\",\n  \"finish_reason\": \"%s\"", k3_turn_end_name(q0->res.end),
            k3_turn_finish_reason(q0->res.end, 0));
    const k3_options *o = b->o;
    fprintf(f, ",\n  \"spec\": {\"drafter\": \"%s\", \"max\": %ld, \"auto\": %s, "
               "\"forwards\": %zu, \"drafted\": %zu, \"accepted\": %zu, \"emitted\": %zu}",
            o->spec ? "ngram" : "none", o->spec, o->spec_auto ? "true" : "false",
            q0->res.forwards, q0->res.drafted, q0->res.accepted, q0->res.generated);
    fprintf(f, ",\n  \"step_seconds\": [");
    for (size_t i = 0; i < nr; i++)
        fprintf(f, "%s%.6f", i ? ", " : "", rc[i].seconds);
    fprintf(f, "],\n  \"steps\": [");
    for (size_t i = 0; i < nr; i++)
        fprintf(f, "%s\n    {\"step\": %zu, \"rows\": %zu, \"sequences\": %zu, \"verifying\": %zu, "
                   "\"prompting\": %zu, \"seconds\": %.6f, \"bytes_read\": %llu}", i ? "," : "", i,
                rc[i].rows, rc[i].seqs, rc[i].verifying, rc[i].prompting, rc[i].seconds,
                (unsigned long long)rc[i].bytes_read);
    fprintf(f, "\n  ],\n  \"prefill_seconds\": %.6f,\n", prefill_s);
    fprintf(f, "  \"wall_seconds\": %.6f,\n", wall);
    fprintf(f, "  \"io_wait_seconds\": %.6f,\n", io.io_wait_seconds);
    fprintf(f, "  \"io_share\": %.4f,\n", wall > 0 ? io.io_wait_seconds / wall : 0.0);
    fprintf(f, "  \"mode\": \"batch\",\n");
    fprintf(f, "  \"layers\": %d,\n", k3_model_n_layers(m));
    k3_model_print_json(m, f, "  ");
    fprintf(f, ",\n  \"peak_rss_bytes\": %lld,\n  \"results\": [", k3_os_peak_rss());
    k3_buf t = { 0 };
    for (size_t i = 0; i < b->n && !e->code; i++) {
        const seqline *q = &b->L[i];
        fprintf(f, "%s\n    {\"line\": %zu, \"prompt_ids\": [", i ? "," : "", q->lineno);
        k3_cli_write_ids(f, q->prompt, q->np);
        fprintf(f, "], \"generated_ids\": [");
        k3_cli_write_ids(f, q->out_ids, q->ngen);
        t.len = 0;
        if (q->text && k3_jtext_put(&t, q->shown.data ? q->shown.data : "", q->shown.len, e))
            break;
        fprintf(f, "], \"text\": %s, \"end\": \"%s\", \"finish_reason\": \"%s\", "
                   "\"forwards\": %zu, \"drafted\": %zu, \"accepted\": %zu}",
                q->text ? t.data : "null", k3_turn_end_name(q->res.end),
                k3_turn_finish_reason(q->res.end, 0), q->res.forwards, q->res.drafted,
                q->res.accepted);
    }
    k3_buf_free(&t);
    fprintf(f, "\n  ]\n}\n");
    if (!e->code && ferror(f))
        k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", b->o->output.out_json, strerror(errno));
    return e->code;
}

/* The rounds (see the header comment); costs into *rc (grown), *nr. */
static int run_rounds(k3_model *m, batch *b, round_cost **rcp, size_t *nr, double *prefill_s,
                      k3_err *e)
{
    size_t cap = 0;
    k3_seq *seqs = k3_malloc(e, b->n * sizeof *seqs, "batch");
    size_t *who = k3_malloc(e, b->n * sizeof *who, "batch");
    double t_start = k3_seconds();
    k3_io_counters io0;
    k3_model_io(m, &io0);
    while (seqs && who && !e->code) {
        size_t ns = 0, rows = 0, prefilling = 0, verifying = 0;
        for (size_t i = 0; i < b->n && !e->code; i++) {
            seqline *q = &b->L[i];
            if (q->done || !q->begun)
                continue;
            if (k3_turn_decode_want(&q->turn, m, q->st, &seqs[ns], e) != K3_OK)
                break;
            rows += seqs[ns].n;
            verifying += seqs[ns].n > 1;
            who[ns++] = i;
        }
        for (size_t i = 0; i < b->n; i++) {
            seqline *q = &b->L[i];
            if (q->done || q->begun || q->fed == q->np || (rows >= K3_PREFILL_CHUNK && ns > 0))
                continue;
            size_t room = rows < K3_PREFILL_CHUNK ? K3_PREFILL_CHUNK - rows : 1;
            size_t n = q->np - q->fed < room ? q->np - q->fed : room;
            k3_seq s = { q->st, q->prompt + q->fed, n, q->fed + n == q->np ? q->logits : NULL,
                         0, NULL };
            seqs[ns] = s;
            who[ns++] = i;
            rows += n;
            prefilling++;
        }
        if (ns == 0 || e->code)
            break;
        double t0 = k3_seconds();
        if (k3_forward_multi(m, seqs, ns, e) != K3_OK)
            break;
        for (size_t k = 0; k < ns && !e->code; k++) {
            seqline *q = &b->L[who[k]];
            if (!q->begun) {
                q->fed += seqs[k].n;
                if (q->fed < q->np)
                    continue;
            }
            advance(m, q, e);
        }
        if (*nr == cap) {
            size_t nc = cap ? 2 * cap : 64;
            round_cost *g = realloc(*rcp, nc * sizeof *g);
            if (!g) {
                k3_fail(e, K3_ERUNTIME, "out of memory for the step timings");
                break;
            }
            *rcp = g;
            cap = nc;
        }
        k3_io_counters io;
        k3_model_io(m, &io);
        round_cost c = { k3_seconds() - t0, rows, ns, verifying, prefilling,
                         io.trunk_bytes + io.expert_bytes - io0.trunk_bytes - io0.expert_bytes };
        (*rcp)[(*nr)++] = c;
        io0 = io;
        if (prefilling)
            *prefill_s = k3_seconds() - t_start;
    }
    free(seqs);
    free(who);
    return e->code;
}

/* Sets up every line's sequence, runs the rounds, prints the answers in
 * input order and writes the report. */
static int run_batch(k3_model *m, const k3_options *o, batch *b, const k3_tokenizer *tok,
                     k3_outputs *out, k3_err *e)
{
    size_t V = k3_model_vocab(m), nr = 0;
    round_cost *rc = NULL;
    double wall0 = k3_seconds(), prefill_s = 0;
    for (size_t i = 0; i < b->n && !e->code; i++) {
        seqline *q = &b->L[i];
        for (size_t j = 0; j < q->np; j++)
            if (q->prompt[j] >= V)
                return k3_fail(e, K3_EINPUT, "%s:%zu: token id %u is outside the vocabulary "
                               "(%zu ids)", b->path, q->lineno, q->prompt[j], V);
        if (k3_state_new(&q->st, m, e) != K3_OK || line_sampler(b, q, V, e) != K3_OK)
            return e->code;
        q->logits = k3_malloc(e, V * sizeof *q->logits, "logits");
        q->out_ids = k3_malloc(e, ((size_t)q->gen + 1) * sizeof *q->out_ids, "batch ids");
        if (!q->logits || !q->out_ids)
            return e->code;
        k3_cli_gen_params(&q->tp.gen, o, (size_t)q->gen);
        q->tp.tok = q->text ? tok : NULL;
        q->tp.show_special = o->show_special;
        q->tp.stop = o->stop;
        q->tp.nstop = o->nstop;
        q->tp.constraint = q->cons ? k3_constrain_get(q->cons) : NULL;
        if (o->spec > 0) { /* ngram: options.c refuses the self drafter here */
            if (k3_drafter_make(&q->drafter, NULL, m, -1, (size_t)o->spec, NULL, e) != K3_OK)
                return e->code;
            q->have_drafter = 1;
            q->tp.spec = (size_t)o->spec;
            q->tp.drafter = &q->drafter;
        }
        k3_turn_sink sink = { q, on_text, NULL, on_token, NULL };
        q->sink = sink;
    }
    if (run_rounds(m, b, &rc, &nr, &prefill_s, e) == K3_OK) {
        for (size_t i = 0; i < b->n; i++) {
            const seqline *q = &b->L[i];
            printf("%s==> line %zu <==\n", i ? "\n" : "", q->lineno);
            if (q->text)
                fwrite(q->shown.data ? q->shown.data : "", 1, q->shown.len, stdout);
            else
                k3_cli_write_ids(stdout, q->out_ids, q->ngen);
            fputc('\n', stdout);
        }
        if (fflush(stdout) != 0)
            k3_fail(e, K3_ERUNTIME, "writing the answers: %s", strerror(errno));
    }
    double wall = k3_seconds() - wall0;
    if (!e->code && !o->quiet) {
        size_t rows = 0;
        for (size_t i = 0; i < nr; i++)
            rows += rc[i].rows;
        fprintf(stderr, "batch: %zu sequences, %zu batched steps, %zu rows, %.3f s wall "
                        "(prompts in after %.3f s)\n", b->n, nr, rows, wall, prefill_s);
        k3_model_print_io(m, stderr);
    }
    if (!e->code && out->report.f)
        write_report(out->report.f, b, m, rc, nr, prefill_s, wall, e);
    free(rc);
    return e->code;
}

static void batch_free(batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        seqline *q = &b->L[i];
        if (q->begun && !q->done) {
            k3_err ignore = { K3_ERUNTIME, "" };
            k3_turn_finish(&q->turn, &q->res, &ignore);
        }
        if (q->have_smp)
            k3_sampler_free(&q->smp);
        if (q->have_drafter)
            k3_drafter_free(&q->drafter);
        k3_state_free(q->st);
        free(q->prompt);
        free(q->logits);
        free(q->out_ids);
        k3_buf_free(&q->shown);
        k3_buf_free(&q->schema);
        k3_constrain_free(q->cons);
        k3_json_free(b->docs[i]);
    }
    free(b->L);
    free(b->docs);
    k3_constrain_vocab_free(b->gv);
    free(b->gfile);
}

int k3_cmd_batch_file(const k3_options *o, k3_batch_open open_model, k3_err *e)
{
    batch b;
    memset(&b, 0, sizeof b);
    b.o = o;
    b.path = o->batch_file;
    k3_tokenizer *tok = NULL;
    k3_model *m = NULL;
    k3_outputs out;
    if (k3_outputs_open(&out, &o->output, NULL, NULL, e) != K3_OK)
        return e->code;
    if (read_file(&b, e) != K3_OK)
        goto done;
    if ((o->grammar_file || o->json_schema_file) &&
        !(b.gfile = k3_read_small_file(e, o->grammar_file ? o->grammar_file
                                                          : o->json_schema_file,
                                       (size_t)16 << 20, &b.gfile_len)))
        goto done;
    int any_text = 0;
    size_t longest = 0;
    for (size_t i = 0; i < b.n; i++)
        any_text |= b.L[i].text != NULL || b.L[i].gtext != NULL;
    if (any_text && k3_tok_load(&tok, o->tok_dir ? o->tok_dir : o->model_dir, e) != K3_OK)
        goto done;
    if (prepare(&b, tok, e) != K3_OK)
        goto done;
    for (size_t i = 0; i < b.n; i++) {
        size_t len = b.L[i].np + (size_t)b.L[i].gen;
        longest = len > longest ? len : longest;
    }
    k3_options sized = *o; /* the plan counts every line's state */
    sized.memory.sequences = (int)b.n;
    if (open_model(&sized, longest, tok, &m, out.trace.f, e) != K3_OK)
        goto done;
    run_batch(m, o, &b, tok, &out, e);
done:
    batch_free(&b);
    k3_model_close(m);
    k3_tok_free(tok);
    if (e->code)
        k3_outputs_abort(&out);
    else
        k3_outputs_commit(&out, e);
    return e->code;
}
