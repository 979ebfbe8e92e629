/* history.h - the chat history file (--history FILE.jsonl).
 *
 * One JSON object per line, one message each:
 *   {"role": "system" | "user" | "assistant", "content": STRING,
 *    "reasoning_content": STRING or null}
 * where a system or user message's content may also be a list of OpenAI
 * content parts, text and image_url with a data URL (chat/images.h):
 * what an --image turn of the chat writes, so it reloads exactly.
 * (reasoning_content only for the assistant; it may be omitted). Empty
 * lines are skipped. Reading is strict - an unknown key or role, a
 * missing content, a value of the wrong type or a line that is not JSON
 * is K3_EINPUT naming FILE:LINE - and never writes.
 *
 * Writing: every turn rewrites the whole file through a temporary file,
 * fsync and rename (util/atomic_file.h), the earlier lines copied byte
 * for byte. Why not append: an append is one write() at best, and a crash
 * or a full disk during it leaves a torn last line that makes the file
 * unreadable next time; with the rename the file is always either the
 * old one or the new one. The cost - rewriting a text file per turn - is
 * nothing next to generating the reply. A turn (the user's message and
 * the reply) is written at once, so the file never holds a question
 * without its answer. */
#ifndef K3_CLI_HISTORY_H
#define K3_CLI_HISTORY_H

#include <stddef.h>

#include "chat/conv.h"
#include "k3/chat.h"
#include "util/json_write.h"

typedef struct k3_history {
    const char *path;
    k3_buf text;      /* the file's content: as read, plus the lines added */
} k3_history;

/* Reads path into c's messages (a missing file is an empty history). */
int k3_history_open(k3_history *h, const char *path, k3_chat *c, k3_err *e);

/* One message of a turn being added (reasoning NULL: none, written null). */
typedef struct k3_history_msg {
    const char *role;
    const char *content;
    size_t content_len;
    const char *reasoning;
    size_t reasoning_len;
    const k3_chat_image *const *images; /* [nimages]: written as content parts before
                                         * the text (data URLs), read back the same */
    size_t nimages;
} k3_history_msg;

/* Adds msgs[0..n) as lines and rewrites the file. */
int k3_history_add(k3_history *h, const k3_history_msg *msgs, size_t n, k3_err *e);

void k3_history_free(k3_history *h);

#endif
