/* fuzz_chat.c - the chat reader and renderer (chat/read.c, render.c,
 * xtml.c, segments.c) on arbitrary conversation JSON, encoded with the
 * tokenizer of fz_tokenizer_dir().
 *
 * Promises checked on an accepted conversation, and again after the chat
 * loop appends the raw input as a user message: those of fz_check_chat
 * (fuzz.h), the special-token rule among them. */
#include "fuzz.h"
#include "k3/chat.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_tokenizer();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    k3_chat *c = NULL;
    k3_err e = { 0, "" };
    int rc = k3_chat_read(&c, (const char *)data, size, &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        FZ_ASSERT(c == NULL, "refused but returned a conversation");
        return 0;
    }
    fz_check_chat(fz_tokenizer(), c);
    /* The chat loop: the raw input as the next user turn. */
    k3_chat_set_generation_prompt(c, 1);
    if (k3_chat_add_message(c, "user", (const char *)data, size, &e) == K3_OK)
        fz_check_chat(fz_tokenizer(), c);
    else
        fz_check_refusal(&e, e.code);
    k3_chat_free(c);
    return 0;
}
