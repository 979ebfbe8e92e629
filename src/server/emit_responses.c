/* emit_responses.c - OpenAI Responses answers (emit.h): the response
 * object, or its server-sent events (each "event: TYPE" with a data
 * object carrying "type" and "sequence_number"):
 *
 *   response.created, response.in_progress,
 *   per output item:
 *     reasoning      output_item.added, reasoning_text.delta..., reasoning_text.done,
 *                    output_item.done
 *     message        output_item.added, content_part.added, output_text.delta...,
 *                    output_text.done, content_part.done, output_item.done
 *     function_call  output_item.added, function_call_arguments.delta,
 *                    function_call_arguments.done, output_item.done
 *   response.completed (status "completed"), or response.incomplete (status
 *   "incomplete", incomplete_details.reason "max_output_tokens") when the
 *   answer ran out of tokens; both carry the whole response with usage.
 *
 * Item ids: "rs_/msg_/fc_<response id>_<n>"; a call's call_id
 * "call_<response id>_<n>". Nothing is stored (store false). */
#include <stdio.h>
#include <string.h>

#include "chat/jtext.h"
#include "chat/reply.h"
#include "server/emit.h"

/* "event: TYPE\ndata: {"type":"TYPE","sequence_number":N," */
static int event(k3_emit *em, const char *type, k3_buf *out, k3_err *e)
{
    return k3_buf_printf(out, e, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%zu,", type,
                         type, em->seq++);
}

/* The response object: status, output (the closed items), usage (NULL:
 * null). */
static int response(const k3_emit *em, const char *status, const k3_usage *u,
                    const k3_emit_ids *ids, k3_buf *out, k3_err *e)
{
    if (k3_buf_puts(out, "{\"id\":", e) || k3_jtext_put(out, em->id, strlen(em->id), e) ||
        k3_buf_printf(out, e,
                      ",\"object\":\"response\",\"created_at\":%lld,\"status\":\"%s\","
                      "\"model\":",
                      em->created, status) ||
        k3_jtext_put(out, em->model, strlen(em->model), e) ||
        k3_buf_printf(out, e,
                      ",\"error\":null,\"incomplete_details\":%s,\"store\":false,"
                      "\"metadata\":{},\"output\":[",
                      strcmp(status, "incomplete") ? "null"
                                                   : "{\"reason\":\"max_output_tokens\"}") ||
        k3_buf_put(out, em->blocks.data, em->blocks.len, e) || k3_buf_puts(out, "]", e) ||
        (ids && (k3_emit_id_list("prompt_token_ids", ids->prompt, ids->nprompt, out, e) ||
                 k3_emit_id_list("token_ids", ids->generated, ids->ngenerated, out, e))) ||
        k3_buf_puts(out, ",\"usage\":", e))
        return e->code;
    if (!u)
        return k3_buf_puts(out, "null}", e);
    return k3_buf_printf(out, e,
                         "{\"input_tokens\":%zu,\"input_tokens_details\":{\"cached_tokens\":%zu},"
                         "\"output_tokens\":%zu,\"output_tokens_details\":{"
                         "\"reasoning_tokens\":%zu},\"total_tokens\":%zu}}",
                         u->prompt, u->cached, u->completion, u->reasoning,
                         u->prompt + u->completion);
}

/* Streaming: response.created and response.in_progress, once. */
static int begin(k3_emit *em, k3_buf *out, k3_err *e)
{
    static const char *const types[] = { "response.created", "response.in_progress" };
    if (!em->stream || em->begun)
        return K3_OK;
    em->begun = 1;
    for (int i = 0; i < 2; i++)
        if (event(em, types[i], out, e) || k3_buf_puts(out, "\"response\":", e) ||
            response(em, "in_progress", NULL, NULL, out, e) || k3_buf_puts(out, "}\n\n", e))
            return e->code;
    return K3_OK;
}

/* The id of item k: PREFIX_<response id>_<k>. */
static void item_id(const k3_emit *em, const char *prefix, size_t k, char *id, size_t cap)
{
    snprintf(id, cap, "%s_%s_%zu", prefix, em->id, k);
}

/* Item k (the open block, whose text is t) as JSON, status "completed" or
 * ("in_progress", empty) as first announced. */
static int text_item(const k3_emit *em, int channel, const k3_buf *t, int done, k3_buf *b,
                     k3_err *e)
{
    char id[96];
    int reasoning = channel == K3_REPLY_REASONING;
    item_id(em, reasoning ? "rs" : "msg", em->nblocks - 1, id, sizeof id);
    if (k3_buf_puts(b,
                    reasoning ? "{\"type\":\"reasoning\",\"id\":"
                              : "{\"type\":\"message\","
                                "\"id\":",
                    e) ||
        k3_jtext_put(b, id, strlen(id), e))
        return e->code;
    if (reasoning) {
        if (k3_buf_puts(b, ",\"summary\":[]", e) ||
            (done &&
             (k3_buf_puts(b, ",\"content\":[{\"type\":\"reasoning_text\",\"text\":", e) ||
              k3_jtext_put(b, t->data ? t->data : "", t->len, e) || k3_buf_puts(b, "}]", e))))
            return e->code;
        return k3_buf_puts(b, "}", e);
    }
    if (k3_buf_printf(b, e, ",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
                      done ? "completed" : "in_progress") ||
        (done && (k3_buf_puts(b, "{\"type\":\"output_text\",\"text\":", e) ||
                  k3_jtext_put(b, t->data ? t->data : "", t->len, e) ||
                  k3_buf_puts(b, ",\"annotations\":[]}", e))))
        return e->code;
    return k3_buf_puts(b, "]}", e);
}

/* ,"item_id":ID,"output_index":K */
static int item_ref(const k3_emit *em, const char *prefix, size_t k, k3_buf *out, k3_err *e)
{
    char id[96];
    item_id(em, prefix, k, id, sizeof id);
    if (k3_buf_puts(out, "\"item_id\":", e) || k3_jtext_put(out, id, strlen(id), e))
        return e->code;
    return k3_buf_printf(out, e, ",\"output_index\":%zu", k);
}

/* output_item.added / output_item.done of item k: {"output_index":k,"item":ITEM} */
static int item_event(k3_emit *em, const char *type, const char *item, size_t n, size_t k,
                      k3_buf *out, k3_err *e)
{
    if (event(em, type, out, e) || k3_buf_printf(out, e, "\"output_index\":%zu,\"item\":", k) ||
        k3_buf_put(out, item, n, e))
        return e->code;
    return k3_buf_puts(out, "}\n\n", e);
}

/* The text part of a message: {"type":"output_text","text":T,"annotations":[]} */
static int part_event(k3_emit *em, const char *type, const k3_buf *t, k3_buf *out, k3_err *e)
{
    if (event(em, type, out, e) || item_ref(em, "msg", em->nblocks - 1, out, e) ||
        k3_buf_puts(out, ",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":", e) ||
        k3_jtext_put(out, t && t->data ? t->data : "", t ? t->len : 0, e))
        return e->code;
    return k3_buf_puts(out, ",\"annotations\":[]}}\n\n", e);
}

/* Closes the open item: its .done events, and its JSON kept for the end. */
static int close_item(k3_emit *em, k3_buf *out, k3_err *e)
{
    if (em->open < 0)
        return K3_OK;
    int reasoning = em->open == K3_REPLY_REASONING;
    const k3_buf *t = reasoning ? &em->reasoning : &em->content;
    size_t at = em->blocks.len + (em->blocks.len > 0);
    if ((em->blocks.len && k3_buf_puts(&em->blocks, ",", e)) ||
        text_item(em, em->open, t, 1, &em->blocks, e))
        return e->code;
    if (em->stream) {
        if (event(em, reasoning ? "response.reasoning_text.done" : "response.output_text.done", out,
                  e) ||
            item_ref(em, reasoning ? "rs" : "msg", em->nblocks - 1, out, e) ||
            k3_buf_puts(out, ",\"content_index\":0,\"text\":", e) ||
            k3_jtext_put(out, t->data ? t->data : "", t->len, e) || k3_buf_puts(out, "}\n\n", e) ||
            (!reasoning && part_event(em, "response.content_part.done", t, out, e)) ||
            item_event(em, "response.output_item.done", em->blocks.data + at, em->blocks.len - at,
                       em->nblocks - 1, out, e))
            return e->code;
    }
    em->open = -1;
    em->content.len = em->reasoning.len = 0;
    return K3_OK;
}

int k3_emit_resp_text(k3_emit *em, int channel, const char *s, size_t n, k3_buf *out, k3_err *e)
{
    int reasoning = channel == K3_REPLY_REASONING;
    if (begin(em, out, e) || (em->open != channel && close_item(em, out, e)))
        return e->code;
    if (em->open != channel) {
        k3_buf b = { 0 };
        em->open = channel;
        em->nblocks++;
        if (em->stream &&
            (text_item(em, channel, NULL, 0, &b, e) ||
             item_event(em, "response.output_item.added", b.data, b.len, em->nblocks - 1, out, e) ||
             (!reasoning && part_event(em, "response.content_part.added", NULL, out, e)))) {
            k3_buf_free(&b);
            return e->code;
        }
        k3_buf_free(&b);
    }
    if (k3_buf_put(reasoning ? &em->reasoning : &em->content, s, n, e) || !em->stream)
        return e->code;
    if (event(em, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", out,
              e) ||
        item_ref(em, reasoning ? "rs" : "msg", em->nblocks - 1, out, e) ||
        k3_buf_puts(out, ",\"content_index\":0,\"delta\":", e) || k3_jtext_put(out, s, n, e))
        return e->code;
    return k3_buf_puts(out, reasoning ? "}\n\n" : ",\"logprobs\":[]}\n\n", e);
}

/* A function_call item: arguments and status as given. */
static int call_item(const k3_emit *em, size_t k, const char *name, size_t nl, const char *args,
                     size_t al, const char *status, k3_buf *b, k3_err *e)
{
    char id[96], call_id[96];
    item_id(em, "fc", k, id, sizeof id);
    snprintf(call_id, sizeof call_id, "call_%s_%zu", em->id, em->ncalls);
    if (k3_buf_puts(b, "{\"type\":\"function_call\",\"id\":", e) ||
        k3_jtext_put(b, id, strlen(id), e) || k3_buf_puts(b, ",\"call_id\":", e) ||
        k3_jtext_put(b, call_id, strlen(call_id), e) || k3_buf_puts(b, ",\"name\":", e) ||
        k3_jtext_put(b, name, nl, e) || k3_buf_puts(b, ",\"arguments\":", e) ||
        k3_jtext_put(b, args, al, e))
        return e->code;
    return k3_buf_printf(b, e, ",\"status\":\"%s\"}", status);
}

int k3_emit_resp_call(k3_emit *em, const char *name, size_t nl, const char *args, size_t al,
                      k3_buf *out, k3_err *e)
{
    k3_buf b = { 0 };
    if (begin(em, out, e) || close_item(em, out, e))
        return e->code;
    size_t k = em->nblocks++, at = em->blocks.len + (em->blocks.len > 0);
    if (!(em->blocks.len && k3_buf_puts(&em->blocks, ",", e)) &&
        !call_item(em, k, name, nl, args, al, "completed", &em->blocks, e) && em->stream &&
        !call_item(em, k, name, nl, "", 0, "in_progress", &b, e) &&
        !item_event(em, "response.output_item.added", b.data, b.len, k, out, e) &&
        !event(em, "response.function_call_arguments.delta", out, e) &&
        !item_ref(em, "fc", k, out, e) && !k3_buf_puts(out, ",\"delta\":", e) &&
        !k3_jtext_put(out, args, al, e) && !k3_buf_puts(out, "}\n\n", e) &&
        !event(em, "response.function_call_arguments.done", out, e) &&
        !item_ref(em, "fc", k, out, e) && !k3_buf_puts(out, ",\"name\":", e) &&
        !k3_jtext_put(out, name, nl, e) && !k3_buf_puts(out, ",\"arguments\":", e) &&
        !k3_jtext_put(out, args, al, e) && !k3_buf_puts(out, "}\n\n", e))
        item_event(em, "response.output_item.done", em->blocks.data + at, em->blocks.len - at, k,
                   out, e);
    em->ncalls++;
    k3_buf_free(&b);
    return e->code;
}

int k3_emit_resp_finish(k3_emit *em, const char *reason, const k3_usage *u, const k3_emit_ids *ids,
                        k3_buf *out, k3_err *e)
{
    const char *status = strcmp(reason, "length") ? "completed" : "incomplete";
    if (begin(em, out, e) || close_item(em, out, e))
        return e->code;
    if (!em->stream)
        return response(em, status, u, ids, out, e);
    if (event(em, strcmp(reason, "length") ? "response.completed" : "response.incomplete", out,
              e) ||
        k3_buf_puts(out, "\"response\":", e) || response(em, status, u, ids, out, e))
        return e->code;
    return k3_buf_puts(out, "}\n\n", e);
}

int k3_emit_resp_error(const k3_api_error *err, int sse, k3_buf *out, k3_err *e)
{
    (void)sse;
    if (k3_buf_puts(out, "event: error\ndata: {\"type\":\"error\",\"code\":", e) ||
        (err->code ? k3_jtext_put(out, err->code, strlen(err->code), e)
                   : k3_buf_printf(out, e, "\"%s\"",
                                   err->status >= 500 ? "server_error" : "invalid_request")) ||
        k3_buf_puts(out, ",\"message\":", e) ||
        k3_jtext_put(out, err->message, strlen(err->message), e) ||
        k3_buf_puts(out, ",\"param\":", e) ||
        (err->param[0] ? k3_jtext_put(out, err->param, strlen(err->param), e)
                       : k3_buf_puts(out, "null", e)))
        return e->code;
    return k3_buf_puts(out, ",\"sequence_number\":0}\n\n", e);
}
