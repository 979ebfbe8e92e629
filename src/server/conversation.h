/* conversation.h - an OpenAI chat request's conversation as the chat
 * renderer reads it (k3/chat.h).
 *
 * The request's messages, tools and options are rewritten into the
 * renderer's own input ({"messages", "tools", "options"}) and read by
 * k3_chat_read, so the renderer's strict reader is the one judge of
 * messages, tool calls, tool_choice and response_format. The rewrite only
 * normalises what OpenAI allows and the renderer spells otherwise: the
 * developer role is system; text content parts are joined with "\n" (a
 * list with an image_url part goes as it is: the reader's parts, text and
 * images in order with no separator, chat/images.h, server/images.h); an
 * assistant's name, refusal, audio and annotations (which the format has
 * no place for) are dropped. Message indices are kept, so the reader's
 * error paths ("messages[2].role") name the request's own fields. */
#ifndef K3_SERVER_CONVERSATION_H
#define K3_SERVER_CONVERSATION_H

#include "k3/chat.h"
#include "server/api.h"
#include "util/json.h"

typedef struct k3_api_conv {
    const k3_json *messages;        /* the request's array (required) */
    const k3_json *tools;           /* or NULL */
    const k3_json *tool_choice;     /* or NULL */
    const k3_json *response_format; /* or NULL */
    int thinking;                   /* -1 not given, else 0 / 1 */
    const char *effort;             /* the renderer's thinking_effort, or NULL */
    int effort_none;                /* reasoning_effort "none": thinking off */
    /* The structured-output extensions (api.h), at most one: */
    const char *grammar;            /* GBNF text (NUL-terminated) -> options.grammar */
    const k3_json *schema;          /* a schema object -> response_format json_schema,
                                     * strict */
} k3_api_conv;

/* Reads the conversation into *out (NULL on failure). Returns 0, or the
 * status of the error in *err: 400 naming the field at fault, 500 when
 * out of memory. */
int k3_api_read_conversation(const k3_api_conv *c, k3_chat **out, k3_api_error *err);

#endif
