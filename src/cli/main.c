/* main.c - the k3 command: parse options, then one of
 *   --render-chat, --tokenize, --detokenize, --tokenize-jsonl (no model),
 *   --chat (interactive, text), or
 *   generation from --prompt / --prompt-file (text out) or --ids (ids out). */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/batch.h"
#include "cli/chat_cmd.h"
#include "cli/chat_run.h"
#include "cli/generate.h"
#include "cli/images.h"
#include "cli/model_dir.h"
#include "cli/options.h"
#include "cli/pack_cmd.h"
#include "cli/tfcheck.h"
#include "cli/serve_cmd.h"
#include "cli/tokenize_cmd.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"
#include "model/model.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/file.h"
#include "util/os.h"
#include "util/progress.h"

/* The Makefile passes both (VERSION, git rev-parse); a build without
 * either (CMake) still names the release. K3_GIT_COMMIT "": not built in
 * a git checkout. */
#ifndef K3_VERSION
#define K3_VERSION "0.1.0"
#endif
#ifndef K3_GIT_COMMIT
#define K3_GIT_COMMIT ""
#endif

/* Prompt files may be large documents, but not unbounded. */
#define MAX_PROMPT_BYTES (64u << 20)

static int fail(const k3_err *e)
{
    fprintf(stderr, "k3: error: %s\n", e->msg);
    return e->code;
}

/* The prompt text of --prompt or --prompt-file (malloc'd), or NULL. */
static char *prompt_text(const k3_options *o, size_t *len, k3_err *e)
{
    if (o->prompt_file)
        return k3_read_small_file(e, o->prompt_file, MAX_PROMPT_BYTES, len);
    if (!o->prompt)
        return NULL;
    *len = strlen(o->prompt);
    char *t = k3_malloc(e, *len + 1, "prompt");
    if (t)
        memcpy(t, o->prompt, *len + 1);
    return t;
}

/* The commands that need only a tokenizer (or nothing). Returns -1 when
 * the options ask for none of them. */
static int tokenizer_command(const k3_options *o, k3_err *e)
{
    if (!o->render_chat && !o->detokenize && !o->tokenize_jsonl && !o->tokenize)
        return -1;
    const char *dir = o->tok_dir ? o->tok_dir : o->model_dir;
    k3_tokenizer *tok = NULL;
    if (dir && k3_tok_load(&tok, dir, e) != K3_OK)
        return e->code;
    if (!tok && !(o->render_chat && !o->tokenize)) {
        k3_fail(e, K3_EINPUT,
                "no tokenizer: give --tok DIR (or a MODEL_DIR holding tiktoken.model)");
    } else if (o->render_chat) {
        k3_cmd_render_chat(tok, o->render_chat, o->tokenize, stdout, e);
    } else if (o->detokenize) {
        if (k3_cmd_detokenize(tok, o->detokenize, stdout, e) == K3_OK)
            fputc('\n', stdout);
    } else if (o->tokenize_jsonl) {
        k3_cmd_tokenize_jsonl(tok, o->tokenize_jsonl, o->prompt_special, stdout, e);
    } else {
        size_t len = 0;
        char *text = prompt_text(o, &len, e);
        if (text)
            k3_cmd_tokenize(tok, text, len, o->prompt_special, stdout, e);
        else if (!e->code)
            k3_fail(e, K3_EINPUT, "--tokenize needs --prompt TEXT or --prompt-file FILE");
        free(text);
    }
    k3_tok_free(tok);
    return e->code;
}

/* Maps the memory options onto the model's. */
static int model_options(const k3_options *o, size_t prompt_len, k3_model_opts *mo, k3_err *e)
{
    if (k3_options_model(&o->memory, mo, e) != K3_OK)
        return e->code;
    if (!o->chat) { /* a one-shot run knows its length; a conversation grows */
        mo->max_context = o->memory.max_context_given ? o->memory.max_context
                                               : (int64_t)(prompt_len + (size_t)o->gen);
        /* The largest call: the prompt goes in K3_PREFILL_CHUNK pieces,
         * then one id a step (k3_forward splits anything longer, with the
         * same bits), so a short prompt plans only the scratch it uses. */
        mo->max_batch = prompt_len == 0 ? 1
                        : prompt_len < K3_PREFILL_CHUNK ? (int)prompt_len
                                                        : K3_PREFILL_CHUNK;
    }
    mo->plan_only = o->plan_only;
    mo->spec = (int)o->spec;
    mo->self_draft = o->draft && !strcmp(o->draft, "self");
    /* chat_run.c: the end of the last prompt, and the start (what /reset
     * goes back to) */
    mo->marks = o->chat ? 2 : 0;
    return K3_OK;
}

/* --plan: open (index + bind + plan, nothing loaded), print, exit. */
static int plan_only(const k3_options *o, k3_err *e)
{
    k3_model_opts mo;
    k3_model *m = NULL;
    double t0 = k3_seconds();
    if (model_options(o, 1, &mo, e) == K3_OK && k3_model_open(&m, o->model_dir, &mo, e) == K3_OK) {
        printf("indexed and bound %zu tensors in %.3f s\n", k3_model_tensor_count(m),
               k3_seconds() - t0);
        k3_model_print_plan(m, stdout);
    }
    k3_model_close(m);
    return e->code;
}

/* --tok was given, or MODEL_DIR holds a tokenizer. */
static int has_tokenizer(const k3_options *o)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/tiktoken.model", o->model_dir);
    return o->tok_dir || stat(path, &st) == 0;
}

/* Opens the model for a run of prompt_len tokens, checks the tokenizer
 * (may be NULL) fits it, prints the plan and sets up the cache trace. */
static int open_model(const k3_options *o, size_t prompt_len, uint64_t held,
                      const k3_tokenizer *tok, k3_model **m, FILE *trace, k3_err *e)
{
    k3_model_opts mo;
    if (model_options(o, prompt_len, &mo, e) == K3_OK)
        mo.held_bytes = held; /* the images' rows (cli/images.h), kept through the prefill */
    if (e->code ||
        k3_model_open(m, o->model_dir, &mo, e) != K3_OK)
        return e->code;
    if (tok && k3_tok_vocab_size(tok) > k3_model_vocab(*m))
        return k3_fail(e, K3_EINPUT, "the tokenizer has %u ids but the model only %u: wrong --tok?",
                       k3_tok_vocab_size(tok), k3_model_vocab(*m));
    if (!o->quiet)
        k3_model_print_plan(*m, stderr);
    k3_model_set_trace(*m, trace);
    /* The layer line of slow steps (a terminal only; one model per run). */
    static k3_layer_progress layer_line;
    k3_layer_progress_init(&layer_line, o->quiet ? NULL : stderr);
    if (layer_line.out) {
        (*m)->on_layer = k3_layer_progress_step;
        (*m)->on_layer_ctx = &layer_line;
    }
    return K3_OK;
}

/* --batch-file's open: one-shot sizing for its longest sequence. */
static int batch_open(const k3_options *o, size_t longest, const k3_tokenizer *tok,
                      k3_model **m, FILE *trace, k3_err *e)
{
    k3_options b = *o;
    b.gen = 0; /* longest counts each line's gen */
    return open_model(&b, longest, 0, tok, m, trace, e);
}

static int chat(const k3_options *o, k3_err *e)
{
    k3_tokenizer *tok = NULL;
    k3_model *m = NULL;
    k3_outputs out;
    if (k3_outputs_open(&out, &o->output, o->save_state, o->conv.history, e) != K3_OK)
        return e->code;
    if (k3_tok_load(&tok, o->tok_dir ? o->tok_dir : o->model_dir, e) == K3_OK &&
        open_model(o, 0, 0, tok, &m, out.trace.f, e) == K3_OK)
        k3_run_chat(m, o, tok, &out, e);
    k3_model_close(m);
    k3_tok_free(tok);
    if (e->code)
        k3_outputs_abort(&out);
    else
        k3_outputs_commit(&out, e);
    return e->code;
}

static int generate(const k3_options *o, k3_err *e)
{
    uint32_t *ids = NULL;
    size_t n = 0;
    k3_tokenizer *tok = NULL;
    k3_model *m = NULL;
    k3_outputs out;
    k3_cli_images imgs;
    memset(&imgs, 0, sizeof imgs);
    if (k3_outputs_open(&out, &o->output, o->save_state, o->conv.history, e) != K3_OK)
        return e->code;
    if (o->ids_csv) {
        if (k3_parse_ids(o->ids_csv, &ids, &n, e) != K3_OK)
            goto done;
    } else {
        size_t len = 0;
        char *text = prompt_text(o, &len, e);
        if (!text && e->code)
            goto done;
        if (!text && !o->load_state) {
            k3_fail(e, K3_EINPUT,
                    "no prompt: give --prompt TEXT, --prompt-file FILE or --ids 1,2,3");
            goto done;
        }
        /* Continuing a --load-state sequence without a prompt: text out
         * when there is a tokenizer, ids out otherwise. */
        if ((text || has_tokenizer(o)) &&
            k3_tok_load(&tok, o->tok_dir ? o->tok_dir : o->model_dir, e) == K3_OK && text) {
            if (o->nimage) /* the images' markup and rows, then the text (cli/images.h) */
                k3_cli_images_prompt(o, tok, text, len, &ids, &n, &imgs, e);
            else
                k3_tok_encode(tok, text, len, o->prompt_special, &ids, &n, e);
        }
        free(text);
        if (e->code)
            goto done;
        if (n == 0 && !o->load_state) {
            k3_fail(e, K3_EINPUT, "the prompt is empty: there is nothing to continue from");
            goto done;
        }
    }
    if (o->tf_check && !(o->draft && !strcmp(o->draft, "self"))) { /* ngram: no model */
        k3_run_tf_check(o, NULL, ids, n, &out, e);
        goto done;
    }
    if (k3_cli_check_context(o, 0, n, e) != K3_OK ||
        open_model(o, n, (uint64_t)imgs.nrows * imgs.row_bytes, tok, &m, out.trace.f, e) !=
            K3_OK)
        goto done;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= k3_model_vocab(m)) {
            k3_fail(e, K3_EINPUT, "--ids: token id %u is outside the vocabulary (%u ids)", ids[i],
                    k3_model_vocab(m));
            goto done;
        }
    if (o->tf_check)
        k3_run_tf_check(o, m, ids, n, &out, e);
    else
        k3_run_generate_embeds(m, o, ids, n, imgs.embeds, tok, &out, e);
done:
    k3_cli_images_free(&imgs);
    k3_model_close(m);
    k3_tok_free(tok);
    free(ids);
    if (e->code)
        k3_outputs_abort(&out);
    else
        k3_outputs_commit(&out, e);
    return e->code;
}

/* OpenMP's idle threads sleep between parallel regions unless the user
 * chose otherwise (OMP_WAIT_POLICY). A decode token runs hundreds of short
 * regions; with the runtime's default (spin a while, then sleep) two
 * threads on a machine where anything else runs took 2.4 s per token on
 * the bench slice instead of 0.43 s passive, while spinning gains little
 * when the machine is idle (docs/TUNING.md, "Threads"). libgomp reads the
 * variable once, when it is loaded, so the only way to give it a default
 * is to start this program again with it set. If that fails, k3 carries
 * on with the runtime's default. */
static void default_wait_policy(char **argv)
{
#if defined(__linux__)
    if (getenv("OMP_WAIT_POLICY") || setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
#else
    (void)argv;
#endif
}

int main(int argc, char **argv)
{
    k3_os_console_init(); /* Windows: bytes out as on POSIX, UTF-8 console */
    k3_os_utf8_args(&argc, &argv); /* Windows: UTF-8 arguments (paths) */
    default_wait_policy(argv);
    if (argc > 1 && !strcmp(argv[1], "serve"))
        return k3_cmd_serve(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "pack-trunk"))
        return k3_cmd_pack_trunk(argc - 1, argv + 1);
    k3_err e = { 0, "" };
    k3_options o;
    if (k3_options_parse(&o, argc, argv, &e) != K3_OK)
        return fail(&e);
    if (o.help) {
        k3_options_usage();
        return 0;
    }
    if (o.list_options) {
        k3_options_list();
        return 0;
    }
    if (o.version) {
        if (K3_GIT_COMMIT[0])
            printf("k3 %s (commit %s)\n", K3_VERSION, K3_GIT_COMMIT);
        else
            printf("k3 %s\n", K3_VERSION);
        return 0;
    }
    if (o.list_presets) {
        k3_print_presets(stdout);
        return 0;
    }
    if (o.threads)
        omp_set_num_threads(o.threads);
    if ((o.model_dir && k3_cli_check_dir(o.model_dir, "MODEL_DIR", &e)) ||
        (o.tok_dir && k3_cli_check_dir(o.tok_dir, "--tok", &e)))
        return fail(&e);
    int rc = tokenizer_command(&o, &e);
    if (rc >= 0)
        return rc ? fail(&e) : 0;
    if (!o.model_dir) {
        fprintf(stderr, "k3: error: no MODEL_DIR given (see k3 --help)\n");
        return K3_EINPUT;
    }
    if (o.plan_only)
        return plan_only(&o, &e) ? fail(&e) : 0;
    if (o.chat)
        return chat(&o, &e) ? fail(&e) : 0;
    if (o.batch_file)
        return k3_cmd_batch_file(&o, batch_open, &e) ? fail(&e) : 0;
    return generate(&o, &e) ? fail(&e) : 0;
}
