/* chat.c - one chat turn with libk3 (k3/turn.h): the conversation rendered
 * in Kimi K3's chat format, the reply generated with the release's end
 * rules and read back into reasoning, content and tool calls.
 *
 *   cc chat.c $(pkg-config --cflags --libs k3) -o chat
 *   ./chat MODEL_DIR TOKENIZER_DIR "Hello!" 64
 *
 * Greedy, thinking at effort low. The content goes to stdout as it is generated (what `k3 MODEL
 * --chat --effort low` prints for the same message), the thinking and a summary line to
 * stderr. Errors: the message and the k3 exit code (k3/error.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <k3/turn.h>

static int show(void *user, int reasoning, const char *s, size_t n)
{
    (void)user;
    fwrite(s, 1, n, reasoning ? stderr : stdout);
    fflush(reasoning ? stderr : stdout);
    return 0; /* 0: go on */
}

int main(int argc, char **argv)
{
    k3_err e = { 0, "" };
    k3_model *m = NULL;
    k3_tokenizer *tok = NULL;
    k3_state *s = NULL;
    k3_chat *c = NULL;
    k3_sampler smp;
    k3_model_opts opts;
    k3_chat_reply r;
    memset(&r, 0, sizeof r);
    if (argc != 5)
        return fprintf(stderr, "usage: %s MODEL_DIR TOKENIZER_DIR MESSAGE N\n", argv[0]), 2;
    k3_model_opts_default(&opts);
    k3_gen_params p = { .max_tokens = (size_t)atoi(argv[4]), .repeat_last_n = 64 };
    if (k3_model_open(&m, argv[1], &opts, &e) == K3_OK &&
        k3_tok_load(&tok, argv[2], &e) == K3_OK && k3_state_new(&s, m, &e) == K3_OK &&
        k3_chat_new(&c, &e) == K3_OK && k3_chat_set_thinking(c, 1, "low", &e) == K3_OK &&
        k3_chat_add_message(c, "user", argv[3], strlen(argv[3]), &e) == K3_OK &&
        k3_sampler_init(&smp, k3_model_vocab(m), &e) == K3_OK) {
        if (k3_chat_turn(m, s, tok, c, &smp, &p, show, NULL, &r, &e) == K3_OK) {
            printf("\n");
            for (size_t i = 0; i < r.ncalls; i++)
                fprintf(stderr, "tool call: %s %s\n", r.calls[i].name, r.calls[i].arguments);
            fprintf(stderr, "\n%zu prompt tokens, %zu generated, finish_reason %s%s\n",
                    r.prompt_tokens, r.generated_tokens, r.finish_reason,
                    r.ended_in_thinking ? " (still thinking: give it more tokens)" : "");
        }
        k3_sampler_free(&smp);
    }
    if (e.code)
        fprintf(stderr, "chat: %s\n", e.msg);
    k3_chat_reply_free(&r);
    k3_chat_free(c);
    k3_state_free(s);
    k3_tok_free(tok);
    k3_model_close(m);
    return e.code;
}
