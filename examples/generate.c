/* generate.c - text from a prompt with libk3, the smallest whole program.
 *
 *   cc generate.c $(pkg-config --cflags --libs k3) -o generate
 *   ./generate MODEL_DIR TOKENIZER_DIR "The capital of France is" 16
 *
 * Greedy, every id's text printed as it comes (end ids too: it runs the
 * full count, like `k3 --ignore-eos --show-special`). Errors: the message
 * and the k3 exit code (include/k3/error.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <k3/generate.h>
#include <k3/tokenizer.h>

static int print_piece(void *tok, uint32_t id, const float *logits, k3_err *e)
{
    const unsigned char *bytes;
    size_t n;
    (void)logits;
    if (k3_tok_piece(tok, id, &bytes, &n, e) == K3_OK)
        fwrite(bytes, 1, n, stdout);
    return 0; /* 0: go on */
}

int main(int argc, char **argv)
{
    k3_err e = { 0, "" };
    k3_model *m = NULL;
    k3_tokenizer *tok = NULL;
    k3_state *s = NULL;
    k3_sampler smp;
    k3_model_opts opts;
    uint32_t *ids = NULL;
    size_t n = 0, ngen = 0;
    k3_gen_end end;
    if (argc != 5)
        return fprintf(stderr, "usage: %s MODEL_DIR TOKENIZER_DIR PROMPT N\n", argv[0]), 2;
    k3_model_opts_default(&opts);
    k3_gen_params p = { .max_tokens = (size_t)atoi(argv[4]), .ignore_eos = 1, .repeat_last_n = 64 };
    if (k3_model_open(&m, argv[1], &opts, &e) == K3_OK &&
        k3_tok_load(&tok, argv[2], &e) == K3_OK &&
        k3_tok_encode(tok, argv[3], strlen(argv[3]), 0, &ids, &n, &e) == K3_OK &&
        k3_state_new(&s, m, &e) == K3_OK && k3_forward(m, s, ids, n, NULL, 0, &e) == K3_OK &&
        k3_sampler_init(&smp, k3_model_vocab(m), &e) == K3_OK) {
        k3_generate(m, s, &smp, &p, print_piece, tok, &end, &ngen, &e);
        k3_sampler_free(&smp);
    }
    printf("\n");
    if (e.code)
        fprintf(stderr, "generate: %s\n", e.msg);
    free(ids);
    k3_state_free(s);
    k3_tok_free(tok);
    k3_model_close(m);
    return e.code;
}
