/* emit_messages.c - Anthropic Messages answers (emit.h): the message
 * object, or its server-sent events:
 *
 *   message_start (usage so far), ping,
 *   per content block: content_block_start, content_block_delta
 *     (thinking_delta, text_delta, input_json_delta), content_block_stop,
 *   message_delta (stop_reason, stop_sequence, usage), message_stop.
 *
 * Blocks: "thinking" (the reasoning channel, with an empty "signature":
 * k3 signs nothing, and a client that sends the block back gets its text
 * kept as the format keeps past reasoning), "text", "tool_use" (one per
 * call, id "toolu_<message id>_<n>", its input the call's JSON object). */
#include <stdio.h>
#include <string.h>

#include "chat/jtext.h"
#include "chat/reply.h"
#include "server/emit.h"

/* "event: NAME\ndata: " */
static int event(const char *name, k3_buf *out, k3_err *e)
{
    return k3_buf_printf(out, e, "event: %s\ndata: ", name);
}

/* Anthropic's usage object. input_tokens are the prompt's ids not read from
 * the cache (Anthropic's meaning): input_tokens + cache_read_input_tokens is
 * the whole prompt, what count_tokens says. */
static int usage(const k3_emit *em, size_t output, k3_buf *out, k3_err *e)
{
    return k3_buf_printf(out, e,
                         "{\"input_tokens\":%zu,\"cache_creation_input_tokens\":0,"
                         "\"cache_read_input_tokens\":%zu,\"output_tokens\":%zu}",
                         em->prompt - em->cached, em->cached, output);
}

/* The message object's head, up to "content":[ */
static int message_head(const k3_emit *em, k3_buf *out, k3_err *e)
{
    if (k3_buf_puts(out, "{\"id\":", e) || k3_jtext_put(out, em->id, strlen(em->id), e) ||
        k3_buf_puts(out, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":", e) ||
        k3_jtext_put(out, em->model, strlen(em->model), e))
        return e->code;
    return k3_buf_puts(out, ",\"content\":[", e);
}

/* Streaming: message_start and a ping, once. */
static int begin(k3_emit *em, k3_buf *out, k3_err *e)
{
    if (!em->stream || em->begun)
        return K3_OK;
    em->begun = 1;
    if (event("message_start", out, e) ||
        k3_buf_puts(out, "{\"type\":\"message_start\",\"message\":", e) ||
        message_head(em, out, e) ||
        k3_buf_puts(out, "],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":", e) ||
        usage(em, 0, out, e) || k3_buf_puts(out, "}}\n\n", e))
        return e->code;
    return k3_buf_puts(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n", e);
}

/* The open block's JSON object (whole), from its text. */
static int block_json(const k3_emit *em, k3_buf *b, k3_err *e)
{
    int thinking = em->open == K3_REPLY_REASONING;
    const k3_buf *t = thinking ? &em->reasoning : &em->content;
    if (k3_buf_puts(b,
                    thinking ? "{\"type\":\"thinking\",\"thinking\":"
                             : "{\"type\":\"text\","
                               "\"text\":",
                    e) ||
        k3_jtext_put(b, t->data ? t->data : "", t->len, e))
        return e->code;
    return k3_buf_puts(b, thinking ? ",\"signature\":\"\"}" : "}", e);
}

/* Closes the open block: content_block_stop, or its JSON kept. */
static int close_block(k3_emit *em, k3_buf *out, k3_err *e)
{
    if (em->open < 0)
        return K3_OK;
    if (em->stream) {
        if (event("content_block_stop", out, e) ||
            k3_buf_printf(out, e, "{\"type\":\"content_block_stop\",\"index\":%zu}\n\n",
                          em->nblocks - 1))
            return e->code;
    } else if ((em->blocks.len && k3_buf_puts(&em->blocks, ",", e)) ||
               block_json(em, &em->blocks, e)) {
        return e->code;
    }
    em->open = -1;
    em->content.len = em->reasoning.len = 0;
    return K3_OK;
}

/* content_block_start of block index nblocks with body (a JSON object). */
static int block_start(k3_emit *em, const char *body, size_t n, k3_buf *out, k3_err *e)
{
    if (event("content_block_start", out, e) ||
        k3_buf_printf(out, e,
                      "{\"type\":\"content_block_start\",\"index\":%zu,"
                      "\"content_block\":",
                      em->nblocks) ||
        k3_buf_put(out, body, n, e))
        return e->code;
    return k3_buf_puts(out, "}\n\n", e);
}

int k3_emit_msg_text(k3_emit *em, int channel, const char *s, size_t n, k3_buf *out, k3_err *e)
{
    int thinking = channel == K3_REPLY_REASONING;
    if (begin(em, out, e) || (em->open != channel && close_block(em, out, e)))
        return e->code;
    if (em->open != channel) {
        static const char t0[] = "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}";
        static const char x0[] = "{\"type\":\"text\",\"text\":\"\"}";
        if (em->stream && (thinking ? block_start(em, t0, sizeof t0 - 1, out, e)
                                    : block_start(em, x0, sizeof x0 - 1, out, e)))
            return e->code;
        em->open = channel;
        em->nblocks++;
    }
    if (k3_buf_put(thinking ? &em->reasoning : &em->content, s, n, e) || !em->stream)
        return e->code;
    if (event("content_block_delta", out, e) ||
        k3_buf_printf(out, e,
                      "{\"type\":\"content_block_delta\",\"index\":%zu,\"delta\":"
                      "{\"type\":\"%s\",\"%s\":",
                      em->nblocks - 1, thinking ? "thinking_delta" : "text_delta",
                      thinking ? "thinking" : "text") ||
        k3_jtext_put(out, s, n, e))
        return e->code;
    return k3_buf_puts(out, "}}\n\n", e);
}

int k3_emit_msg_call(k3_emit *em, const char *name, size_t nl, const char *args, size_t al,
                     k3_buf *out, k3_err *e)
{
    k3_buf b = { 0 };
    char id[96];
    snprintf(id, sizeof id, "toolu_%s_%zu", em->id, em->ncalls++);
    if (begin(em, out, e) || close_block(em, out, e))
        return e->code;
    /* {"type":"tool_use","id":...,"name":...,"input": */
    if (!k3_buf_puts(&b, "{\"type\":\"tool_use\",\"id\":", e) &&
        !k3_jtext_put(&b, id, strlen(id), e) && !k3_buf_puts(&b, ",\"name\":", e) &&
        !k3_jtext_put(&b, name, nl, e) && !k3_buf_puts(&b, ",\"input\":", e)) {
        if (!em->stream) {
            /* The turn's arguments are one JSON object text (chat/turn.h). */
            if (!(em->blocks.len && k3_buf_puts(&em->blocks, ",", e)) &&
                !k3_buf_put(&em->blocks, b.data, b.len, e) && !k3_buf_put(&em->blocks, args, al, e))
                k3_buf_puts(&em->blocks, "}", e);
        } else if (!k3_buf_puts(&b, "{}}", e) && !block_start(em, b.data, b.len, out, e) &&
                   !event("content_block_delta", out, e) &&
                   !k3_buf_printf(out, e,
                                  "{\"type\":\"content_block_delta\",\"index\":%zu,"
                                  "\"delta\":{\"type\":\"input_json_delta\","
                                  "\"partial_json\":",
                                  em->nblocks) &&
                   !k3_jtext_put(out, args, al, e) && !k3_buf_puts(out, "}}\n\n", e) &&
                   !event("content_block_stop", out, e)) {
            k3_buf_printf(out, e, "{\"type\":\"content_block_stop\",\"index\":%zu}\n\n",
                          em->nblocks);
        }
    }
    em->nblocks++;
    k3_buf_free(&b);
    return e->code;
}

/* ,"prompt_token_ids":[...],"token_ids":[...] when ids. */
static int put_ids(const k3_emit_ids *ids, k3_buf *out, k3_err *e)
{
    if (!ids)
        return K3_OK;
    if (k3_emit_id_list("prompt_token_ids", ids->prompt, ids->nprompt, out, e))
        return e->code;
    return k3_emit_id_list("token_ids", ids->generated, ids->ngenerated, out, e);
}

/* OpenAI's finish reason as Anthropic's stop_reason. */
static const char *stop_reason(const k3_emit *em, const char *reason)
{
    if (!strcmp(reason, "length"))
        return "max_tokens";
    if (!strcmp(reason, "tool_calls"))
        return "tool_use";
    return em->stop_string ? "stop_sequence" : "end_turn";
}

/* "stop_sequence": the string matched when why is "stop_sequence", else null. */
static int stop_sequence(const k3_emit *em, const char *why, k3_buf *out, k3_err *e)
{
    const char *s = strcmp(why, "stop_sequence") ? NULL : em->stop_string;
    if (k3_buf_puts(out, "\"stop_sequence\":", e))
        return e->code;
    return s ? k3_jtext_put(out, s, strlen(s), e) : k3_buf_puts(out, "null", e);
}

int k3_emit_msg_finish(k3_emit *em, const char *reason, const k3_usage *u, const k3_emit_ids *ids,
                       k3_buf *out, k3_err *e)
{
    const char *why = stop_reason(em, reason);
    if (begin(em, out, e) || close_block(em, out, e))
        return e->code;
    if (em->stream) {
        if (event("message_delta", out, e) ||
            k3_buf_printf(out, e,
                          "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
                          "\"%s\",",
                          why) ||
            stop_sequence(em, why, out, e) || k3_buf_puts(out, "},\"usage\":", e) ||
            usage(em, u->completion, out, e) || put_ids(ids, out, e) ||
            k3_buf_puts(out, "}\n\n", e))
            return e->code;
        return k3_buf_puts(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", e);
    }
    if (message_head(em, out, e) || k3_buf_put(out, em->blocks.data, em->blocks.len, e) ||
        k3_buf_printf(out, e, "],\"stop_reason\":\"%s\",", why) ||
        stop_sequence(em, why, out, e) || k3_buf_puts(out, ",\"usage\":", e) ||
        usage(em, u->completion, out, e) || put_ids(ids, out, e))
        return e->code;
    return k3_buf_puts(out, "}", e);
}

/* Anthropic's error type for an HTTP status. */
static const char *error_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

int k3_emit_msg_error(const k3_api_error *err, int sse, k3_buf *out, k3_err *e)
{
    char msg[1200];
    /* The field at fault rides in the message (Anthropic's shape has no param). */
    if (err->param[0] && !strstr(err->message, err->param))
        snprintf(msg, sizeof msg, "%s: %s", err->param, err->message);
    else
        snprintf(msg, sizeof msg, "%s", err->message);
    if ((sse && event("error", out, e)) ||
        k3_buf_printf(out, e, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":",
                      error_type(err->status)) ||
        k3_jtext_put(out, msg, strlen(msg), e))
        return e->code;
    return k3_buf_puts(out, sse ? "}}\n\n" : "}}", e);
}
