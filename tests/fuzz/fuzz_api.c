/* fuzz_api.c - the JSON request bodies of `k3 serve` (server/api.c:
 * k3_api_parse_chat_request, k3_api_parse_completion_request) on arbitrary
 * bytes. Input: byte 0 bit 0 chooses the endpoint (0 chat, 1
 * completions); the rest is the body.
 *
 * Promises checked (api.h): a refusal is 400 or 500 with a message; an
 * accepted request has its values inside the documented ranges (max_tokens
 * within the server's limit, temperature [0, 2], top_p (0, 1], min_p
 * [0, 1], repetition penalty (0, 10], at most 4 non-empty stop strings);
 * a chat request's conversation renders and encodes with the special-token
 * rule (fz_check_chat), and a completion prompt encodes with special
 * tokens disallowed to no special id (fz_check_encode). The request is
 * freed after success and failure alike (LeakSanitizer checks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/api.h"

static const k3_api_limits LIM = { 64 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_tokenizer();
    return 0;
}

static void check_request(const k3_api_request *r, int chat)
{
    FZ_ASSERT(r->max_tokens == -1 || (r->max_tokens >= 1 && r->max_tokens <= LIM.max_tokens),
              "max_tokens %ld", r->max_tokens);
    FZ_ASSERT(r->temperature >= 0 && r->temperature <= 2, "temperature %g", r->temperature);
    FZ_ASSERT(r->top_p > 0 && r->top_p <= 1, "top_p %g", r->top_p);
    FZ_ASSERT(r->min_p >= 0 && r->min_p <= 1, "min_p %g", r->min_p);
    FZ_ASSERT(r->repeat_penalty > 0 && r->repeat_penalty <= 10, "penalty %g", r->repeat_penalty);
    FZ_ASSERT(r->top_k >= 0, "top_k %d", r->top_k);
    FZ_ASSERT(r->frequency_penalty >= -2 && r->frequency_penalty <= 2, "frequency_penalty %g",
              r->frequency_penalty);
    FZ_ASSERT(r->presence_penalty >= -2 && r->presence_penalty <= 2, "presence_penalty %g",
              r->presence_penalty);
    FZ_ASSERT(r->nstop <= K3_API_MAX_STOP, "%zu stop strings", r->nstop);
    for (size_t i = 0; i < r->nstop; i++)
        FZ_ASSERT(r->stop[i] && r->stop[i][0], "stop string %zu empty", i);
    if (chat) {
        FZ_ASSERT(r->kind == K3_API_CHAT && r->chat, "a chat request without a conversation");
        fz_check_chat(fz_tokenizer(), r->chat);
    } else {
        FZ_ASSERT(r->kind == K3_API_COMPLETION &&
                      ((r->prompt && r->prompt[r->prompt_len] == '\0') ||
                       (r->prompt_ids && r->nprompt_ids)),
                  "a completion without a prompt");
        if (!r->prompt)
            return;
        size_t n;
        free(fz_check_encode(fz_tokenizer(), (const uint8_t *)r->prompt, r->prompt_len, 0, &n));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int chat = !(data[0] & 1);
    const char *body = (const char *)data + 1;
    k3_api_request r;
    k3_api_error err;
    memset(&r, 0, sizeof r);
    memset(&err, 0, sizeof err);
    int rc = chat ? k3_api_parse_chat_request(body, size - 1, &LIM, &r, &err)
                  : k3_api_parse_completion_request(body, size - 1, &LIM, &r, &err);
    if (rc != 0) {
        FZ_ASSERT((rc == 400 || rc == 500) && err.status == rc && err.message[0] && err.type,
                  "refusal %d without status, type or message", rc);
        if (getenv("K3_FUZZ_VERBOSE"))
            fprintf(stderr, "refused (%d): %s\n", rc, err.message);
    } else {
        check_request(&r, chat);
    }
    k3_api_request_free(&r);
    return 0;
}
