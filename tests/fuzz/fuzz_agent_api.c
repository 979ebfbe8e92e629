/* fuzz_agent_api.c - the Anthropic Messages and OpenAI Responses front ends
 * of `k3 serve` (server/messages.c, server/responses.c, server/translate.c)
 * on arbitrary bytes. Input: byte 0 chooses the parser (bit 0: 0 messages,
 * 1 responses; bit 1: messages as count_tokens); the rest is the body.
 *
 * Promises checked: a refusal is 400 or 500 with a type and a message; an
 * accepted request is a chat of the front end's kind (the translation always
 * yields a body the chat parser accepts or refuses, never a crash), its
 * values inside the chat parser's ranges (max_tokens within the limit), and
 * its conversation renders and encodes (fz_check_chat). The request is
 * freed after success and failure alike (LeakSanitizer checks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/messages.h"
#include "server/responses.h"

static const k3_api_limits LIM = { 64 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_tokenizer();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int responses = data[0] & 1, count = (data[0] >> 1) & 1;
    const char *body = (const char *)data + 1;
    k3_api_request r;
    k3_api_error err;
    memset(&r, 0, sizeof r);
    int rc = responses ? k3_responses_parse(body, size - 1, &LIM, &r, &err)
                       : k3_messages_parse(body, size - 1, &LIM, count, &r, &err);
    if (rc != 0) {
        FZ_ASSERT((rc == 400 || rc == 500) && err.status == rc && err.message[0] && err.type,
                  "refusal %d without status, type or message", rc);
        if (getenv("K3_FUZZ_VERBOSE"))
            fprintf(stderr, "refused (%d): %s\n", rc, err.message);
    } else {
        FZ_ASSERT(r.kind == (responses ? K3_API_RESPONSES : K3_API_MESSAGES) && r.chat,
                  "an accepted request without its kind or conversation");
        FZ_ASSERT(r.max_tokens == -1 || (r.max_tokens >= 1 && r.max_tokens <= LIM.max_tokens),
                  "max_tokens %ld", r.max_tokens);
        fz_check_chat(fz_tokenizer(), r.chat);
    }
    k3_api_request_free(&r);
    return 0;
}
