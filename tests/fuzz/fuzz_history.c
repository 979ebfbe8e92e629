/* fuzz_history.c - the chat history reader and writer (cli/history.c:
 * k3_history_open, k3_history_add) on arbitrary history files.
 *
 * Promises checked (history.h): a refusal is K3_EINPUT naming FILE:LINE
 * (or another code with a message); an accepted history's conversation
 * renders and encodes with the special-token rule (fz_check_chat); a turn
 * added to it (the input itself as the user's text and the reply, when it
 * is valid UTF-8 as chat_run.c guarantees) is written so that the file reads
 * back, with the earlier lines kept byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/history.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_tokenizer();
    return 0;
}

/* Opens the history at path into a new conversation; rc, with *h and *c set
 * on success (free both). */
static int open_history(const char *path, k3_history *h, k3_chat **c, k3_err *e)
{
    FZ_ASSERT(k3_chat_new(c, e) == K3_OK, "out of memory");
    int rc = k3_history_open(h, path, *c, e);
    if (rc != K3_OK) {
        k3_history_free(h);
        k3_chat_free(*c);
        *c = NULL;
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1100];
    snprintf(path, sizeof path, "%s", fz_write("history.jsonl", data, size));
    k3_history h;
    k3_chat *c;
    k3_err e = { 0, "" };
    int rc = open_history(path, &h, &c, &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        FZ_ASSERT(rc != K3_EINPUT || strstr(e.msg, "history.jsonl:"), "no FILE:LINE: %s", e.msg);
        return 0;
    }
    fz_check_chat(fz_tokenizer(), c);
    k3_chat_free(c);
    if (!fz_utf8_valid(data, size)) {
        k3_history_free(&h);
        return 0;
    }
    k3_history_msg turn[2] = {
        { "user", (const char *)data, size, NULL, 0, NULL, 0 },
        { "assistant", (const char *)data, size, "thought", 7, NULL, 0 },
    };
    rc = k3_history_add(&h, turn, 2, &e);
    FZ_ASSERT(rc == K3_OK, "adding a turn failed: %s", e.msg);
    k3_history_free(&h);
    rc = open_history(path, &h, &c, &e);
    FZ_ASSERT(rc == K3_OK, "the history written does not read back: %s", e.msg);
    FZ_ASSERT(h.text.len > size && !memcmp(h.text.data, data, size),
              "the earlier lines were not kept byte for byte");
    fz_check_chat(fz_tokenizer(), c);
    k3_history_free(&h);
    k3_chat_free(c);
    return 0;
}
