/* options.h - the k3 command line, parsed strictly: an unknown option or a
 * bad value is a one-line error saying what was expected (exit 2). */
#ifndef K3_CLI_OPTIONS_H
#define K3_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "k3/k3.h"

/* --stop may be given this many times. */
#define K3_MAX_STOP 16

typedef struct k3_options {
    const char *model_dir;
    const char *ids_csv;          /* --ids */
    const char *tok_dir;          /* --tok DIR (default: the model directory) */
    const char *prompt;           /* --prompt TEXT */
    const char *prompt_file;      /* --prompt-file FILE */
    int prompt_special;           /* --prompt-special: special-token text becomes ids */
    int tokenize;                 /* --tokenize: print the prompt's ids and exit */
    const char *detokenize;       /* --detokenize IDS */
    const char *tokenize_jsonl;   /* --tokenize-jsonl FILE (tokenizer gate) */
    const char *render_chat;      /* --render-chat FILE */
    long gen;                     /* --gen N (default 16; in chat, per reply) */
    int gen_given;                /* --gen was given */
    int recompute;                /* --recompute: rerun the whole sequence each step */
    int ignore_eos;               /* --ignore-eos: do not stop at an end-of-message id */
    const char *dump_logits;      /* --dump-logits FILE: one row per generated token */
    const char *dump_prompt_logits; /* --dump-prompt-logits FILE: one row per prompt token */
    const char *out_json;         /* --out FILE */
    int layers;                   /* --layers N */
    const char *preset;           /* --preset NAME */
    double budget_gb;             /* --budget-gb X (< 0: not given) */
    int list_presets;             /* --list-presets */
    double trunk_gb, cache_gb;    /* --trunk-gb, --cache-gb (< 0: not given) */
    int trunk_ring;               /* --trunk-ring N */
    long trunk_layers;            /* --trunk-layers N (-1: not given) */
    long cache_experts;           /* --cache-experts N (0: not given) */
    int stream_embed, stream_lm_head; /* --stream-embed, --stream-lm-head */
    long max_context;             /* --max-context N (default K3_DEFAULT_MAX_CONTEXT) */
    int max_context_given;        /* --max-context was given */
    int no_mem_check;             /* --no-mem-check */
    int plan_only;                /* --plan: print the memory plan and exit */
    const char *trunk_dir;        /* --trunk DIR: packed trunk (k3 pack-trunk) */
    const char *cache_trace_dir;  /* --dump-cache-trace DIR */
    int threads;                  /* --threads N (0 = all cores) */
    /* Sampling (k3/sample.h); defaults: greedy, every filter off. */
    double temperature, top_p, min_p, repeat_penalty;
    long top_k, repeat_last_n;    /* --top-k, --repeat-last-n (default 64) */
    unsigned long long seed;      /* --seed */
    const char *stop[K3_MAX_STOP];/* --stop STRING, repeatable */
    size_t nstop;
    /* State files. */
    const char *save_state;       /* --save-state FILE */
    const char *load_state;       /* --load-state FILE */
    /* Chat. */
    int chat;                     /* --chat: interactive loop on stdin */
    const char *system;           /* --system TEXT */
    const char *history;          /* --history FILE.jsonl */
    int no_thinking;              /* --no-thinking */
    const char *effort;           /* --effort low|high|max (default max when thinking) */
    int show_thinking;            /* --show-thinking */
    int no_reuse;                 /* --no-reuse: refeed the whole conversation every turn */
    int quiet;                    /* --quiet */
    int help, version;
} k3_options;

int k3_options_parse(k3_options *o, int argc, char **argv, k3_err *e);
void k3_options_usage(void);

/* The memory options (--preset, --trunk-gb, ... --trunk, --layers,
 * --max-context) onto a model's. The caller sets max_batch, and
 * max_context where it knows better (a one-shot run: prompt + --gen). */
int k3_options_model(const k3_options *o, k3_model_opts *mo, k3_err *e);

/* Parses "1,2,3" (decimal, no spaces, no empty entries) into a malloc'd
 * array. Errors name the offending entry. */
int k3_parse_ids(const char *csv, uint32_t **ids, size_t *n, k3_err *e);

#endif
