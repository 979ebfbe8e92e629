/* conv.h - the in-memory conversation (struct k3_chat) shared by the reader
 * (read.c), the chat-loop helpers (conv.c) and the renderer (render.c).
 *
 * Plain data, already validated: the renderer trusts every field. All
 * strings and arrays except msgs belong to the conversation's allocation
 * list and are released together by k3_chat_free. */
#ifndef K3_CHAT_CONV_H
#define K3_CHAT_CONV_H

#include <stddef.h>

#include "k3/chat.h"

/* A byte string; s == NULL means absent (JSON null or no key), which the
 * format does not always treat like "". May hold NUL bytes (\u0000). */
typedef struct k3_text {
    const char *s;
    size_t n;
} k3_text;

typedef enum { K3_ROLE_SYSTEM, K3_ROLE_USER, K3_ROLE_ASSISTANT, K3_ROLE_TOOL } k3_role;

typedef struct k3_tool_call {
    k3_text id;        /* matched by tool messages' tool_call_id */
    k3_text name;      /* always present */
    k3_text arguments; /* JSON text of an object (OpenAI style), or absent */
} k3_tool_call;

/* One part of a message whose content is a list (OpenAI's content parts,
 * docs/VISION.md §4 step 4): text, or the conversation's image[image]. */
typedef struct k3_part {
    k3_text text;  /* image < 0 */
    long image;    /* >= 0: an index into k3_chat.images; -1: text */
} k3_part;

/* An image of the conversation (chat/images.h): the file's bytes as given
 * (a data URL's payload or an --image file) and its decoded size, which
 * the markup shows (§4 step 1). Images are numbered in the order they
 * occur in the conversation, which is the order the renderer emits them. */
typedef struct k3_chat_image {
    const unsigned char *data;
    size_t n;
    int width, height;
} k3_chat_image;

typedef struct k3_msg {
    k3_role role;
    k3_text content;      /* when nparts == 0 */
    const k3_part *parts; /* system, user: [nparts] the content as parts, in order */
    size_t nparts;
    k3_text name;         /* system, user, tool */
    k3_text reasoning;    /* assistant: reasoning_content */
    k3_text tool_call_id; /* tool */
    k3_tool_call *calls;  /* assistant */
    size_t ncalls;
} k3_msg;

struct k3_chat {
    k3_msg *msgs;
    size_t n, cap;
    /* Options. The strings are literals naming the option's value. */
    int thinking;
    int add_generation_prompt;
    const char *effort;          /* "low" / "high" / "max", or NULL */
    const char *tool_choice;     /* "required" / "none", or NULL ("auto"); a named
                                  * function is "required" (the release has no notice
                                  * for naming one) with tool_name set */
    k3_text tool_name;           /* tool_choice {"type": "function", "function":
                                  * {"name"}}: the one tool the reply must call; it is
                                  * declared in tools (checked); absent otherwise */
    const char *response_format; /* "json_object" / "json_schema", or NULL ("text") */
    k3_text schema_json;         /* json_schema: the schema, sorted compact JSON */
    int schema_strict;           /* json_schema.strict was true: a keyword decoding
                                  * cannot enforce refuses the request */
    k3_text grammar;             /* options.grammar: a GBNF grammar the reply's text
                                  * must match (k3's extension; no notice is rendered) */
    k3_text tools_json;          /* the tools list, sorted compact JSON; absent when none */
    k3_chat_image *images;       /* [nimages] in order of occurrence (chat/images.h) */
    size_t nimages, images_cap;
    /* Set while a CLI history is read (cli/history.c): images added are
     * checked from their headers only (vision/image.h k3_image_probe), their
     * pixels decoded when they are encoded, so that a replay over
     * --max-context is refused before any pixel is decoded (issue 35 F1).
     * 0 (k3 serve, /image): each image is decoded whole when added. */
    int images_header_only;
    void **owned;                /* every allocation above except msgs */
    size_t nowned, owned_cap;
};

/* n bytes owned by c (released by k3_chat_free). */
void *k3_chat_alloc(k3_chat *c, size_t n, k3_err *e);

/* A NUL-terminated copy of s[0..n) owned by c. */
int k3_chat_keep(k3_chat *c, const char *s, size_t n, k3_text *out, k3_err *e);

/* Appends a zeroed message of the given role; *out points at it until the
 * next append. */
int k3_chat_push(k3_chat *c, k3_role role, k3_msg **out, k3_err *e);

#endif
