/* options.c - see options.h. */
#include "cli/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/draft.h"
#include "util/error.h"

#define O k3_options
#define M k3_memory_opts

const k3_opt k3_memory_opt_table[] = {
    K3_OPT_STR_("--preset", "NAME", M, preset,
                "ultra|laptop|desktop|workstation|server|max|auto"),
    K3_OPT_REAL_("--budget-gb", "X", M, budget_gb, 0, 1e6, K3_OPTF_GB,
                 "a total budget of X GB, split as a preset's is"),
    K3_OPT_REAL_("--trunk-gb", "X", M, trunk_gb, 0, 1e6, K3_OPTF_GB,
                 "pin layers up to X GB; the rest stream from disk"),
    K3_OPT_INT_("--trunk-ring", "N", M, trunk_ring, 1, 64,
                "ring slots for streamed layers (default 2)"),
    K3_OPT_REAL_("--cache-gb", "X", M, cache_gb, 0, 1e6, K3_OPTF_GB,
                 "expert cache size (default: every expert resident)"),
    K3_OPT_FLAG_("--stream-embed", M, stream_embed, "read embedding rows from disk per token"),
    K3_OPT_FLAG_("--stream-lm-head", M, stream_lm_head, "stream lm_head through the ring"),
    K3_OPT_FLAG_("--no-mem-check", M, no_mem_check,
                 "run even if the plan exceeds available memory"),
    K3_OPT_STR_("--trunk", "DIR", M, trunk_dir,
                "read layers and lm_head from DIR/trunk.bin, made by\n"
                "k3 pack-trunk MODEL_DIR DIR (one aligned read per layer)"),
    K3_OPT_STR_("--draft-trunk", "DIR", M, draft_trunk,
                "with --draft self: the drafter multiplies by DIR/draft.bin\n"
                "(k3 pack-trunk MODEL_DIR DIR --draft q8), held in memory"),
    K3_OPT_INT_("--trunk-layers", "N", M, trunk_layers, 0, 100000,
                "pin exactly the first N layers (diagnostics)"),
    K3_OPT_INT_("--cache-experts", "N", M, cache_experts, 1, 1L << 30,
                "expert cache of exactly N experts (diagnostics)"),
    K3_OPT_INT_("--layers", "N", M, layers, 1, 100000,
                "bind and run only the first N layers (diagnostics)"),
    { .kind = K3_OPT_END },
};

static const k3_opt main_table[] = {
    K3_OPT_TEXT_("usage: k3 MODEL_DIR (--prompt TEXT | --prompt-file FILE | --ids 1,2,3)"
                 " [--gen N] [options]\n"
                 "       k3 MODEL_DIR --chat [--system TEXT] [--history FILE.jsonl] [options]\n"
                 "       k3 --tok DIR (--prompt TEXT | --prompt-file FILE) --tokenize\n"
                 "       k3 --tok DIR --detokenize 1,2,3\n"
                 "       k3 --tok DIR --render-chat CONVERSATION.json [--tokenize]\n"
                 "       k3 pack-trunk MODEL_DIR TRUNK_DIR [--layers N] [--force] [--verify]\n"
                 "       k3 serve MODEL_DIR [--port N] [options]   (see k3 serve --help)\n"
                 "\n"
                 "Prompt and tokenizer:\n"),
    K3_OPT_STR_("--model", "DIR", O, model_dir, "the model directory (the same as MODEL_DIR)"),
    K3_OPT_STR_("--prompt", "TEXT", O, prompt,
                "prompt text (special-token text stays ordinary text)"),
    K3_OPT_STR_("--prompt-file", "FILE", O, prompt_file,
                "prompt text from a file (must be UTF-8; - reads stdin)"),
    K3_OPT_FLAG_("--prompt-special", O, prompt_special,
                 "let special-token text in the prompt become its ids"),
    K3_OPT_STR_("--ids", "LIST", O, ids_csv, "prompt token ids, comma-separated (output: ids)"),
    { .kind = K3_OPT_STRS, .name = "--image", .metavar = "FILE", .off = offsetof(O, image),
      .off2 = offsetof(O, nimage), .max = K3_MAX_IMAGES,
      .help = "a PNG or JPEG image before the --prompt text (with --chat:\n"
              "in the first message), encoded by the checkpoint's vision\n"
              "tower; repeatable (up to 16)" },
    K3_OPT_STR_("--batch-file", "F", O, batch_file,
                "run every prompt of the JSONL file F together, one line\n"
                "{\"prompt\": TEXT} or {\"ids\": [...]} each (optional \"gen\",\n"
                "\"temperature\", \"top_p\", \"top_k\", \"seed\", \"grammar\"\n"
                "(GBNF text), \"json_schema\" (a schema)); answers\n"
                "under \"==> line N <==\" headings, in input order"),
    K3_OPT_STR_("--tok", "DIR", O, tok_dir, "tokenizer directory (default: MODEL_DIR)"),
    K3_OPT_FLAG_("--tokenize", O, tokenize,
                 "print the prompt's token ids and exit (no model needed)"),
    K3_OPT_STR_("--detokenize", "LIST", O, detokenize, "print the text of token ids and exit"),
    K3_OPT_STR_("--render-chat", "FILE", O, render_chat,
                "print a conversation rendered in the chat format\n"
                "({\"messages\", \"tools\", \"options\"}); with --tokenize its ids"),
    /* The tokenizer gate's corpus mode (cli/tokenize_cmd.h). */
    K3_OPT_STR_("--tokenize-jsonl", "FILE", O, tokenize_jsonl, NULL),
    K3_OPT_TEXT_("\nGeneration:\n"),
    K3_OPT_INT_GIVEN("--gen", "N", O, gen, gen_given, 0, 1L << 30,
                     "tokens to generate (default 16; in --chat, per reply:\n"
                     "default 1024 when stdin is a terminal, else 8192)"),
    { .kind = K3_OPT_STRS, .name = "--stop", .metavar = "STRING", .off = offsetof(O, stop),
      .off2 = offsetof(O, nstop), .max = K3_MAX_STOP,
      .help = "stop when the text contains STRING (not printed);\n"
              "repeatable (up to 16); in --chat, on the reply text" },
    K3_OPT_STR_("--grammar", "FILE", O, grammar_file,
                "constrain the output to the GBNF grammar in FILE\n"
                "(docs/GRAMMAR.md); in --chat, each reply's text"),
    K3_OPT_STR_("--json-schema", "FILE", O, json_schema_file,
                "constrain the output to JSON valid under the JSON Schema\n"
                "in FILE (a keyword it cannot enforce: exit 2); in --chat,\n"
                "each reply (as response_format json_schema, strict)"),
    K3_OPT_FLAG_("--ignore-eos", O, ignore_eos,
                 "keep generating past end ids ([EOS], the config's\n"
                 "eos ids, and in --chat <|end_of_msg|>)"),
    K3_OPT_INT_AUTO("--spec", "N", O, spec, 0, 16,
                    "speculative decoding: verify up to N drafted tokens per\n"
                    "forward pass, as many as the measured cost says pay; the\n"
                    "same tokens as without. 0: off; default auto (up to 8)"),
    K3_OPT_STR_("--draft", "NAME", O, draft,
                "the drafter for --spec: ngram (earlier text, default),\n"
                "self (the model itself with fewer experts, on its own state)\n"
                "or dspark (a DSpark drafter model: --draft-model)"),
    K3_OPT_STR_("--draft-model", "DIR", O, draft_model,
                "with --draft dspark: the drafter's directory (config.json,\n"
                "model.safetensors; docs/MODEL.md section 10), generation runs only"),
    K3_OPT_INT_("--draft-topk", "K", O, draft_topk, 1, 1024,
                "routed experts per token of --draft self (default: a\n"
                "quarter of the model's, at least 1)"),
    K3_OPT_FLAG_("--tf-check", O, tf_check,
                 "with --ids or --prompt: how often the drafter would have\n"
                 "proposed each next id, and the tokens per pass (no model)"),
    K3_OPT_FLAG_("--show-special", O, show_special,
                 "print the text of special tokens (reserved ids, media\n"
                 "tokens; default: they print nothing, as in llama.cpp)"),
    K3_OPT_INT_GIVEN("--max-context", "N", O, memory.max_context, memory.max_context_given, 1,
                     1L << 24,
                     "hard cap on prompt + generated tokens: a longer prompt,\n"
                     "or --gen past it, is an error (exit 2); a chat reply\n"
                     "stops at it. Also sizes the KV cache plan (default 4096)"),
    K3_OPT_FLAG_("--recompute", O, recompute, "rerun the whole sequence every step (verification)"),
    { .kind = K3_OPT_FLAG, .name = "--incremental", .off = offsetof(O, recompute), .set = 0,
      .help = "incremental decoding with caches (the default)" },
    K3_OPT_INT_("--threads", "N", O, threads, 1, 4096, "worker threads (default: all cores)"),
    K3_OPT_TEXT_("\nSampling (default greedy; the same --seed gives the same tokens on every\n"
                 "machine, thread count and memory budget):\n"),
    K3_OPT_REAL_("--temperature", "X", O, sampling.temperature, 0, 1e6, 0,
                 "0 = greedy (default); > 0 samples"),
    K3_OPT_INT_("--top-k", "N", O, sampling.top_k, 0, 1L << 30,
                "keep the N most likely tokens (0 = off, default)"),
    K3_OPT_REAL_("--top-p", "X", O, sampling.top_p, 0, 1, K3_OPTF_LO_OPEN,
                 "keep the smallest set with probability >= X (1 = off)"),
    K3_OPT_REAL_("--min-p", "X", O, sampling.min_p, 0, 1, 0,
                 "drop tokens below X times the best one's probability\n"
                 "(0 = off)"),
    K3_OPT_REAL_("--repeat-penalty", "X", O, sampling.repeat_penalty, 0, 1e6, K3_OPTF_LO_OPEN,
                 "penalise the last --repeat-last-n tokens (1 = off)"),
    K3_OPT_REAL_("--frequency-penalty", "X", O, sampling.frequency_penalty, -2, 2, 0,
                 "subtract X per occurrence in the window (0 = off)"),
    K3_OPT_REAL_("--presence-penalty", "X", O, sampling.presence_penalty, -2, 2, 0,
                 "subtract X from every id in the window (0 = off)"),
    K3_OPT_INT_("--repeat-last-n", "N", O, sampling.repeat_last_n, 0, 1L << 30,
                "the penalties' window (default 64)"),
    { .kind = K3_OPT_SEED, .name = "--seed", .metavar = "N", .off = offsetof(O, sampling.seed),
      .help = "random seed (default 0)" },
    K3_OPT_TEXT_("\nState (the caches of a sequence, reusable across runs):\n"),
    K3_OPT_STR_("--load-state", "FILE", O, load_state,
                "continue the sequence saved in FILE: the prompt (may be\n"
                "omitted) is appended to it; refused for another model"),
    K3_OPT_STR_("--save-state", "FILE", O, save_state,
                "save the sequence after the run (prompt and every\n"
                "generated token); with --chat, the conversation"),
    K3_OPT_STR_("--prefix-cache-dir", "DIR", O, prefix_dir,
                "with --chat: start from the longest snapshot of the\n"
                "conversation in DIR (k3 serve's disk tier too), and\n"
                "leave its own there at the end"),
    K3_OPT_TEXT_("\nChat (reads user lines on stdin; \"/exit\" or end of input ends):\n"),
    K3_OPT_FLAG_("--chat", O, chat, "interactive chat in the K3 chat format"),
    K3_OPT_STR_("--system", "TEXT", O, conv.system,
                "a system message first (not written to the history:\n"
                "give it again when replaying)"),
    K3_OPT_STR_("--history", "FILE.jsonl", O, conv.history,
                "replay the turns in FILE (if it exists), then append\n"
                "each new turn {\"role\",\"content\",\"reasoning_content\"}"),
    K3_OPT_FLAG_("--no-thinking", O, conv.no_thinking, "reply without a thinking channel"),
    K3_OPT_STR_("--effort", "LEVEL", O, conv.effort,
                "thinking effort: low, high or max (default: low when\n"
                "stdin is a terminal, max otherwise)"),
    K3_OPT_FLAG_("--show-thinking", O, conv.show_thinking,
                 "print the thinking (dimmed on a terminal); the default\n"
                 "when stdin and stdout are terminals"),
    K3_OPT_FLAG_("--hide-thinking", O, conv.hide_thinking,
                 "fold the thinking into a \"thinking... N tokens\" counter"),
    K3_OPT_FLAG_("--no-history-file", O, conv.no_history_file,
                 "on a terminal, keep no line history (default: Up and\n"
                 "Ctrl-R recall messages from $XDG_STATE_HOME/k3/history,\n"
                 "else ~/.local/state/k3/history)"),
    K3_OPT_FLAG_("--no-reuse", O, conv.no_reuse,
                 "refeed the whole conversation every turn (verification\n"
                 "and benchmarks: the replies must not change)"),
    K3_OPT_TEXT_("\nMemory (never changes the answer, only the speed; GB = 2^30 bytes):\n"),
    { .kind = K3_OPT_TABLE, .off = offsetof(O, memory), .sub = k3_memory_opt_table },
    K3_OPT_FLAG_("--list-presets", O, list_presets, "show the presets and exit"),
    K3_OPT_FLAG_("--plan", O, plan_only,
                 "print the memory plan (and index/bind timing) and exit"),
    K3_OPT_TEXT_("\nOutput:\n"),
    K3_OPT_STR_("--out", "FILE", O, output.out_json,
                "JSON report: ids, per-step seconds, peak RSS;\n"
                "with --chat: a JSON report of every turn (prompt ids,\n"
                "generated ids, finish reason)"),
    K3_OPT_STR_("--dump-logits", "FILE", O, output.dump_logits,
                "float32 logits, one row per generated token"),
    K3_OPT_STR_("--dump-prompt-logits", "F", O, output.dump_prompt_logits,
                "float32 logits, one row per prompt position"),
    K3_OPT_STR_("--dump-cache-trace", "DIR", O, output.cache_trace_dir,
                "write every expert request to DIR/trace.txt"),
    K3_OPT_FLAG_AS("--quiet", "-q", O, quiet,
                   "print only the generated text (ids without a tokenizer):\n"
                   "nothing on stderr but errors"),
    K3_OPT_FLAG_("--verbose", O, verbose,
                 "after the run, the per-step table (with the ids each\n"
                 "forward pass emitted) and the I/O report on stderr;\n"
                 "default: one summary line"),
    K3_OPT_TEXT_("\nllama.cpp's short options work too: -m DIR (--model), -p TEXT (--prompt),\n"
                 "-n N (--gen), -c N (--max-context), -t N (--threads), -s N (--seed).\n"),
    K3_OPT_ALIAS_("-m", "--model"),
    K3_OPT_ALIAS_("-p", "--prompt"),
    K3_OPT_ALIAS_("-n", "--gen"),
    K3_OPT_ALIAS_("-c", "--max-context"),
    K3_OPT_ALIAS_("-t", "--threads"),
    K3_OPT_ALIAS_("-s", "--seed"),
    K3_OPT_TEXT_("\nDiagnostics:\n"
                 "  --help, --version\n"),
    K3_OPT_FLAG_AS("--help", "-h", O, help, NULL),
    K3_OPT_FLAG_("--version", O, version, NULL),
    /* Every option name, one per line (tests/gates/05-help-in-readme.sh). */
    K3_OPT_FLAG_("--list-options", O, list_options, NULL),
    K3_OPT_TEXT_("\n"
                 "Exit codes: 0 ok, 1 runtime or I/O failure, 2 bad usage or input (options,\n"
                 "files, a malformed history line, a prompt over --max-context, a state file of\n"
                 "another model), 3 does not fit the memory budget, 4 run invalid (a weight read\n"
                 "failed).\n"),
    { .kind = K3_OPT_END },
};

static const k3_opt_cmd main_cmd = {
    .opts = main_table,
    .col = 26,
    .prefix = "",
    .command = "k3",
    .extra = ": only one MODEL_DIR",
    .pos = { offsetof(O, model_dir) },
    .npos = 1,
};

#undef O
#undef M

void k3_options_usage(void)
{
    k3_opt_help(&main_cmd, stdout);
}

void k3_options_list(void)
{
    k3_opt_list(&main_cmd, stdout);
}

/* The narrow modes (issue 35 F2) and the only options that apply to each:
 * any other option given with one is exit 2 naming both, never silently
 * ignored (--tf-check --save-state F used to exit 0 without writing F).
 * An option added to the table is refused in these modes until it is
 * listed here; tests/gates/76-mode-options.sh tries every option of
 * --list-options against every mode. The wide modes (a generation run,
 * --chat, --batch-file) are judged by check_combinations below. A mode is
 * the first of this list that is given (cli/main.c's order). */
static const char *const memory_opts =
    " --preset --budget-gb --trunk-gb --trunk-ring --cache-gb --stream-embed --stream-lm-head"
    " --no-mem-check --trunk --draft-trunk --trunk-layers --cache-experts --layers"
    " --dump-cache-trace ";
static const struct narrow_mode {
    const char *name;
    size_t flag;         /* offset of its field (a const char * or an int, see is_ptr) */
    int is_ptr;
    const char *applies; /* " --a --b " */
    int memory;          /* memory_opts apply too */
} narrow_modes[] = {
    { "--render-chat", offsetof(k3_options, render_chat), 1,
      " --render-chat --tokenize --tok --quiet --verbose ", 0 },
    { "--detokenize", offsetof(k3_options, detokenize), 1,
      " --detokenize --tok --quiet --verbose ", 0 },
    { "--tokenize-jsonl", offsetof(k3_options, tokenize_jsonl), 1,
      " --tokenize-jsonl --prompt-special --tok --quiet --verbose ", 0 },
    { "--tokenize", offsetof(k3_options, tokenize), 0,
      " --tokenize --prompt --prompt-file --prompt-special --tok --quiet --verbose ", 0 },
    { "--tf-check", offsetof(k3_options, tf_check), 0,
      " --tf-check --ids --prompt --prompt-file --prompt-special --tok --spec --draft"
      " --draft-topk --out --threads --max-context --quiet --verbose ", 1 },
};

/* 1 when " NAME " is in the list. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if (p[-1] == ' ' && p[n] == ' ')
            return 1;
    return 0;
}

static int check_mode(const k3_options *o, const k3_opt *const *seen, size_t nseen, k3_err *e)
{
    const char *base = (const char *)o;
    for (size_t m = 0; m < sizeof narrow_modes / sizeof narrow_modes[0]; m++) {
        const struct narrow_mode *nm = &narrow_modes[m];
        const void *f = base + nm->flag;
        int given = nm->is_ptr ? *(const char *const *)f != NULL : *(const int *)f != 0;
        if (!given)
            continue;
        for (size_t i = 0; i < nseen; i++)
            if (!listed(nm->applies, seen[i]->name) &&
                !(nm->memory && listed(memory_opts, seen[i]->name)))
                return k3_fail(e, K3_EINPUT, "%s does not apply to %s: drop it", seen[i]->name,
                               nm->name);
        return K3_OK;
    }
    return K3_OK;
}

/* Combinations that cannot work, found before anything is loaded. */
static int check_combinations(const k3_options *o, k3_err *e)
{
    const k3_conv_opts *c = &o->conv;
    int dspark = o->draft && !strcmp(o->draft, "dspark");
    if (o->draft && strcmp(o->draft, "ngram") != 0 && strcmp(o->draft, "self") != 0 && !dspark)
        return k3_fail(e, K3_EINPUT, "--draft %s: the drafters are ngram, self and dspark",
                       o->draft);
    if (dspark != (o->draft_model != NULL))
        return k3_fail(e, K3_EINPUT, dspark ? "--draft dspark needs --draft-model DIR"
                                            : "--draft-model goes with --draft dspark");
    /* gen/draft_dspark.c: the drafter reads the hidden states the model's
     * forwards keep from a state's first position; --chat and --batch-file
     * do not attach it yet, and a loaded state kept none. */
    if (dspark && (o->chat || o->batch_file || o->load_state || o->tf_check))
        return k3_fail(e, K3_EINPUT, "--draft dspark drafts for a generation run only (not "
                                     "yet with --chat, --batch-file, --load-state or "
                                     "--tf-check)");
    if (o->draft_topk >= 0 && !(o->draft && !strcmp(o->draft, "self")))
        return k3_fail(e, K3_EINPUT, "--draft-topk goes with --draft self");
    if (o->memory.draft_trunk && !(o->draft && !strcmp(o->draft, "self")))
        return k3_fail(e, K3_EINPUT, "--draft-trunk goes with --draft self");
    if (o->draft && o->spec == 0 && !o->tf_check)
        return k3_fail(e, K3_EINPUT, "--draft goes with --spec N (N > 0) or auto");
    if (o->tf_check && (o->chat || !(o->ids_csv || o->prompt || o->prompt_file)))
        return k3_fail(e, K3_EINPUT, "--tf-check checks a given sequence: give --ids, --prompt "
                                     "or --prompt-file");
    if (o->spec > 0 && o->recompute)
        return k3_fail(e, K3_EINPUT, "--spec and --recompute do not go together");
    /* cli/images.h: the images' rows enter one --prompt run's prefill, or the
     * first message of a --chat (cli/chat_images.h). */
    if (o->nimage && (o->ids_csv || o->batch_file || o->tf_check || o->recompute))
        return k3_fail(e, K3_EINPUT, "--image does not go with --ids, --batch-file, "
                       "--tf-check or --recompute (not supported yet)");
    if (o->nimage && !(o->prompt || o->prompt_file || o->chat))
        return k3_fail(e, K3_EINPUT, "--image goes with --prompt TEXT, --prompt-file FILE or "
                       "--chat");
    if (o->batch_file && (o->prompt || o->prompt_file || o->ids_csv || o->chat ||
                          o->load_state || o->save_state || o->recompute ||
                          o->tf_check || o->output.dump_logits ||
                          o->output.dump_prompt_logits))
        return k3_fail(e, K3_EINPUT, "--batch-file takes its prompts from the file: it does not "
                                     "go with --prompt, --prompt-file, --ids, --chat, "
                                     "--load-state, --save-state, --recompute, "
                                     "--tf-check, --dump-logits or --dump-prompt-logits");
    /* draft_self.c: the self drafter's drafts are forwards of its own
     * state, one sequence at a time, outside the shared pass: with many
     * lines that is a second pass per line and step, which cannot pay
     * (and its second state per line doubles the memory per line). */
    if (o->batch_file && o->draft && !strcmp(o->draft, "self"))
        return k3_fail(e, K3_EINPUT, "--batch-file drafts with ngram only: --draft self would "
                                     "run one drafting pass per line and step outside the "
                                     "shared pass, which cannot pay");
    if (o->grammar_file && o->json_schema_file)
        return k3_fail(e, K3_EINPUT, "give --grammar or --json-schema, not both");
    if ((o->grammar_file || o->json_schema_file) && (o->ignore_eos || o->tf_check))
        return k3_fail(e, K3_EINPUT, "--grammar and --json-schema do not go with --ignore-eos "
                                     "(the text could never end) or --tf-check");
    if ((o->prompt != NULL) + (o->prompt_file != NULL) + (o->ids_csv != NULL) > 1)
        return k3_fail(e, K3_EINPUT, "give one prompt: --prompt, --prompt-file or --ids");
    if (o->prefix_dir && !o->chat)
        return k3_fail(e, K3_EINPUT, "--prefix-cache-dir goes with --chat (k3 serve has its own)");
    if (o->chat && (o->prompt || o->prompt_file || o->ids_csv))
        return k3_fail(e, K3_EINPUT, "--chat reads the user's messages from stdin: drop "
                                     "--prompt, --prompt-file and --ids");
    if (!o->chat && (c->system || c->history || c->no_thinking || c->effort ||
                     c->show_thinking || c->hide_thinking || c->no_history_file ||
                     c->no_reuse))
        return k3_fail(e, K3_EINPUT, "--system, --history, --no-thinking, --effort, "
                                     "--show-thinking, --hide-thinking, --no-history-file "
                                     "and --no-reuse go with --chat");
    if (c->show_thinking && c->hide_thinking)
        return k3_fail(e, K3_EINPUT, "--show-thinking and --hide-thinking: give one");
    if (o->chat && (o->output.dump_logits || o->output.dump_prompt_logits))
        return k3_fail(e, K3_EINPUT, "--chat replies print text: --dump-logits and "
                                     "--dump-prompt-logits do not apply");
    if (c->effort && strcmp(c->effort, "low") && strcmp(c->effort, "high") &&
        strcmp(c->effort, "max"))
        return k3_fail(e, K3_EINPUT, "--effort %s: expected low, high or max", c->effort);
    if (c->effort && c->no_thinking)
        return k3_fail(e, K3_EINPUT, "--effort sets the thinking effort: it cannot go with "
                                     "--no-thinking");
    if (o->recompute && (o->load_state || o->chat))
        return k3_fail(e, K3_EINPUT, "--recompute replays a sequence from scratch: it cannot "
                                     "go with --load-state or --chat");
    return K3_OK;
}

void k3_memory_opts_default(k3_memory_opts *m)
{
    memset(m, 0, sizeof *m);
    m->max_context = K3_DEFAULT_MAX_CONTEXT;
    m->trunk_gb = -1;
    m->cache_gb = -1;
    m->budget_gb = -1;
    m->trunk_layers = -1;
}

int k3_options_parse(k3_options *o, int argc, char **argv, k3_err *e)
{
    memset(o, 0, sizeof *o);
    o->gen = 16;
    k3_memory_opts_default(&o->memory);
    o->sampling.top_p = 1.0;
    o->sampling.repeat_penalty = 1.0;
    o->sampling.repeat_last_n = 64;
    o->spec = K3_OPT_AUTO;
    o->draft_topk = -1;
    const k3_opt *seen[256];
    size_t nseen = 0;
    if (k3_opt_parse_seen(&main_cmd, o, argc, argv, seen, sizeof seen / sizeof seen[0], &nseen,
                          e) != K3_OK ||
        check_mode(o, seen, nseen, e) || check_combinations(o, e))
        return e->code;
    /* auto: drafting where it pays (the cost gate, per sequence: also each
     * --batch-file line); --recompute has no decode steps to draft for. */
    if (o->spec == K3_OPT_AUTO)
        o->spec = o->recompute ? 0 : K3_SPEC_AUTO, o->spec_auto = 1;
    return K3_OK;
}

int k3_parse_ids(const char *csv, uint32_t **ids, size_t *n, k3_err *e)
{
    size_t cap = 1;
    for (const char *p = csv; *p; p++)
        cap += *p == ',';
    uint32_t *v = k3_malloc(e, cap * sizeof *v, "ids");
    if (!v)
        return e->code;
    size_t k = 0;
    const char *p = csv;
    for (;;) {
        const char *start = p;
        unsigned long long x = 0;
        while (*p >= '0' && *p <= '9' && x <= 0xFFFFFFFFull)
            x = x * 10 + (unsigned long long)(*p++ - '0');
        if (p == start || x > 0xFFFFFFFFull || (*p && *p != ',')) {
            const char *end = strchr(start, ',');
            int len = end ? (int)(end - start) : (int)strlen(start);
            free(v);
            return k3_fail(e, K3_EINPUT, "token id list: entry %zu \"%.*s\" is not a token id",
                           k + 1, len > 40 ? 40 : len, start);
        }
        v[k++] = (uint32_t)x;
        if (!*p)
            break;
        p++;
    }
    *ids = v;
    *n = k;
    return K3_OK;
}

int k3_options_model(const k3_memory_opts *o, k3_model_opts *mo, k3_err *e)
{
    k3_model_opts_default(mo);
    mo->n_layers = o->layers;
    if (o->preset && k3_preset_budget(o->preset, &mo->budget_gb) != 0)
        return k3_fail(e, K3_EINPUT, "--preset %s: expected ultra, laptop, desktop, workstation, "
                                     "server, max or auto", o->preset);
    if (o->preset && o->budget_gb >= 0)
        return k3_fail(e, K3_EINPUT, "--preset and --budget-gb both set a total budget: give one");
    if (o->budget_gb >= 0)
        mo->budget_gb = o->budget_gb;
    if (o->trunk_gb >= 0 || o->cache_gb >= 0)
        mo->budget_gb = -1; /* explicit sizes win over a preset */
    mo->trunk_gb = o->trunk_gb;
    mo->cache_gb = o->cache_gb;
    mo->trunk_layers = (int)o->trunk_layers;
    mo->cache_experts = o->cache_experts;
    mo->trunk_ring = o->trunk_ring;
    mo->stream_embed = o->stream_embed;
    mo->stream_lm_head = o->stream_lm_head;
    mo->max_context = o->max_context;
    mo->no_mem_check = o->no_mem_check;
    mo->trunk_dir = o->trunk_dir;
    mo->draft_trunk = o->draft_trunk;
    mo->sequences = o->sequences;
    return K3_OK;
}
