/* options.h - the k3 command line, parsed strictly: an unknown option or a
 * bad value is a one-line error saying what was expected (exit 2).
 *
 * The options are one table (options.c, cli/opt_table.h) that also prints
 * k3 --help and k3 --list-options. k3_options groups them by their user:
 * .sampling (the sampler), .memory (the model's plan, shared with k3
 * serve), .output (cli/outputs.h), .conv (the --chat conversation); the
 * rest pick what the command does. */
#ifndef K3_CLI_OPTIONS_H
#define K3_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "cli/opt_table.h"
#include "cli/outputs.h"
#include "k3/error.h"
#include "k3/k3.h"

/* --stop may be given this many times. */
#define K3_MAX_STOP 16
/* --image may be given this many times. */
#define K3_MAX_IMAGES 16

/* Sampling (k3/sample.h): what k3_cli_sampler sets up. Defaults: greedy,
 * every filter off, --repeat-last-n 64. */
typedef struct k3_sampling_opts {
    double temperature, top_p, min_p, repeat_penalty;
    double frequency_penalty, presence_penalty; /* [-2, 2], OpenAI's */
    long top_k, repeat_last_n;    /* --top-k, --repeat-last-n */
    unsigned long long seed;      /* --seed */
} k3_sampling_opts;

/* Memory and model shape: what k3_options_model maps onto k3_model_opts
 * (also the options of k3 serve, k3_memory_opt_table). Sizes in GB are
 * 2^30 bytes; < 0: not given. */
typedef struct k3_memory_opts {
    int layers;                   /* --layers N (0: all) */
    const char *preset;           /* --preset NAME */
    double budget_gb;             /* --budget-gb X */
    double trunk_gb, cache_gb;    /* --trunk-gb, --cache-gb */
    int trunk_ring;               /* --trunk-ring N (0: the default) */
    long trunk_layers;            /* --trunk-layers N (-1: not given) */
    long cache_experts;           /* --cache-experts N (0: not given) */
    int stream_embed, stream_lm_head; /* --stream-embed, --stream-lm-head */
    long max_context;             /* --max-context N (default K3_DEFAULT_MAX_CONTEXT) */
    int max_context_given;        /* --max-context was given */
    int no_mem_check;             /* --no-mem-check */
    const char *trunk_dir;        /* --trunk DIR: packed trunk (k3 pack-trunk) */
    const char *draft_trunk;      /* --draft-trunk DIR: the self drafter's q8 trunk */
    int sequences;                /* states run together (no option: --batch-file's lines);
                                   * 0 = 1 */
} k3_memory_opts;

/* The conversation of --chat (cli/chat_run.h); each is refused without it. */
typedef struct k3_conv_opts {
    const char *system;           /* --system TEXT */
    const char *history;          /* --history FILE.jsonl */
    int no_thinking;              /* --no-thinking */
    const char *effort;           /* --effort low|high|max (default max when thinking) */
    int show_thinking;            /* --show-thinking (the default on a terminal) */
    int hide_thinking;            /* --hide-thinking: a counter instead, on a terminal */
    int no_history_file;          /* --no-history-file: no line history kept */
    int no_reuse;                 /* --no-reuse: refeed the whole conversation every turn */
} k3_conv_opts;

typedef struct k3_options {
    const char *model_dir;
    const char *ids_csv;          /* --ids */
    const char *batch_file;       /* --batch-file F.jsonl (cli/batch.h) */
    const char *tok_dir;          /* --tok DIR (default: the model directory) */
    const char *prompt;           /* --prompt TEXT */
    const char *image[K3_MAX_IMAGES]; /* --image FILE, repeatable (cli/images.h) */
    size_t nimage;
    const char *prompt_file;      /* --prompt-file FILE */
    int prompt_special;           /* --prompt-special: special-token text becomes ids */
    int tokenize;                 /* --tokenize: print the prompt's ids and exit */
    const char *detokenize;       /* --detokenize IDS */
    const char *tokenize_jsonl;   /* --tokenize-jsonl FILE (tokenizer gate) */
    const char *render_chat;      /* --render-chat FILE */
    long gen;                     /* --gen N (default 16; in chat, per reply) */
    int gen_given;                /* --gen was given */
    int recompute;                /* --recompute: rerun the whole sequence each step */
    int ignore_eos;               /* --ignore-eos: do not stop at an end id */
    int show_special;             /* --show-special: special ids print their text */
    long spec;                    /* --spec N: drafts verified per step at most (0: off) */
    int spec_auto;                /* --spec auto (the default): spec is K3_SPEC_AUTO */
    const char *draft;            /* --draft NAME: the drafter ("ngram", "self", "dspark";
                                   * NULL: ngram) */
    const char *draft_model;      /* --draft-model DIR: the dspark drafter's directory */
    long draft_topk;              /* --draft-topk K: the self drafter's experts (-1: default) */
    int tf_check;                 /* --tf-check: the drafter on the given ids (ngram: no model) */
    const char *grammar_file;     /* --grammar FILE: a GBNF grammar (chat/constrain.h) */
    const char *json_schema_file; /* --json-schema FILE: a JSON Schema, enforced strictly */
    const char *stop[K3_MAX_STOP];/* --stop STRING, repeatable */
    size_t nstop;
    int threads;                  /* --threads N (0 = all cores) */
    int list_presets;             /* --list-presets */
    int plan_only;                /* --plan: print the memory plan and exit */
    const char *save_state;       /* --save-state FILE */
    const char *load_state;       /* --load-state FILE */
    const char *prefix_dir;       /* --prefix-cache-dir DIR (--chat) */
    int chat;                     /* --chat: interactive loop on stdin */
    int quiet;                    /* --quiet */
    int verbose;                  /* --verbose: the per-step table and I/O report */
    int help, version, list_options;
    k3_sampling_opts sampling;
    k3_memory_opts memory;
    k3_output_opts output;
    k3_conv_opts conv;
} k3_options;

/* The memory options' entries (cli/opt_table.h), relative to a
 * k3_memory_opts: shared by k3 MODEL_DIR and k3 serve. */
extern const k3_opt k3_memory_opt_table[];

/* The defaults of the memory options (nothing given). */
void k3_memory_opts_default(k3_memory_opts *m);

/* Parses k3 MODEL_DIR's argv (the defaults first), then refuses the
 * combinations that cannot work (--chat with --prompt, ...). */
int k3_options_parse(k3_options *o, int argc, char **argv, k3_err *e);
/* k3 --help; k3 --list-options. */
void k3_options_usage(void);
void k3_options_list(void);

/* The memory options (--preset, --trunk-gb, ... --trunk, --layers,
 * --max-context) onto a model's. The caller sets max_batch, and
 * max_context where it knows better (a one-shot run: prompt + --gen). */
int k3_options_model(const k3_memory_opts *m, k3_model_opts *mo, k3_err *e);

/* Parses "1,2,3" (decimal, no spaces, no empty entries) into a malloc'd
 * array. Errors name the offending entry. */
int k3_parse_ids(const char *csv, uint32_t **ids, size_t *n, k3_err *e);

#endif
